package manifests_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cozystack/metallb-iad/test/manifests"
)

// TestEveryKustomizationBuilds builds every kustomization under config/
// in-process, as the local control plane does for config/crd.
func TestEveryKustomizationBuilds(t *testing.T) {
	root := filepath.Join(manifests.Root(), "config")
	var dirs []string
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == "kustomization.yaml" {
			dirs = append(dirs, filepath.Dir(p))
		}
		return err
	}))
	require.NotEmpty(t, dirs)
	for _, dir := range dirs {
		rel, _ := filepath.Rel(manifests.Root(), dir)
		t.Run(rel, func(t *testing.T) {
			objs, err := manifests.Build(dir)
			require.NoError(t, err)
			assert.NotEmpty(t, objs)
		})
	}
}

// TestDefaultHasOnePerController checks config/default: one Deployment,
// ServiceAccount, ClusterRole and lease Role per controller, in one namespace
// (MetalLB's kinds in MetalLB's).
func TestDefaultHasOnePerController(t *testing.T) {
	objs, err := manifests.Build("config/default")
	require.NoError(t, err)
	kinds := map[string][]string{}
	for _, o := range objs {
		kinds[o.GetKind()] = append(kinds[o.GetKind()], o.GetName())
		switch {
		case o.GetKind() == "Namespace" || o.GetKind() == "ClusterRole" || o.GetKind() == "ClusterRoleBinding":
		case (o.GetKind() == "Role" || o.GetKind() == "RoleBinding") && o.GetNamespace() == "metallb-system":
			// MetalLB's kinds, granted only in MetalLB's namespace.
			assert.Contains(t, []string{"metallb-iad-class", "metallb-iad-service", "metallb-iad-ipaddress"}, o.GetName())
		default:
			assert.Equal(t, "metallb-iad-system", o.GetNamespace(), "%s/%s", o.GetKind(), o.GetName())
		}
	}
	for _, c := range []string{"class", "claim", "service", "ipaddress"} {
		assert.Contains(t, kinds["Deployment"], "metallb-iad-"+c)
		assert.Contains(t, kinds["ServiceAccount"], "metallb-iad-"+c)
		assert.Contains(t, kinds["ClusterRole"], "metallb-iad-"+c)
		assert.Contains(t, kinds["Role"], "metallb-iad-"+c+"-leader-election")
	}
	assert.Equal(t, []string{"metallb-iad-system"}, kinds["Namespace"])
}

// TestCRDsBuild checks that config/crd yields the three kinds of the model.
func TestCRDsBuild(t *testing.T) {
	crds, err := manifests.CRDs("config/crd")
	require.NoError(t, err)
	var got []string
	for _, c := range crds {
		got = append(got, c.Name)
	}
	assert.ElementsMatch(t, []string{
		"ipaddressclasses.local.sdn.cozystack.io",
		"ipaddressclaims.local.sdn.cozystack.io",
		"ipaddresses.local.sdn.cozystack.io",
	}, got)
	_, err = os.Stat(filepath.Join(manifests.Root(), "PROJECT"))
	assert.NoError(t, err, "the Kubebuilder PROJECT file exists")
}
