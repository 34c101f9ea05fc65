package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/sharingkey"
	"github.com/cozystack/metallb-iad/test/cluster"
	"github.com/cozystack/metallb-iad/test/manifests"
)

// Disaster drills on the chart path (node and kind): what an operator may
// do to the release by hand loses no address.

// TestReleaseNamespaceDeleted: `kubectl delete namespace` of the release
// namespace and of the placeholders' one (by default they are one: the
// placeholders and the sharing key live there), then `helm install` again.
// Every claim stays Bound, every address is held or attached with the same
// IP, and a plain Service created while no driver ran got none of them.
func TestReleaseNamespaceDeleted(t *testing.T) {
	needChart(t)
	story(t, "release namespace deleted", "deleting the release namespace and installing again loses no address", "ns-drill", func(ctx context.Context, t *testing.T, cfg *envconf.Config, k *kit) {
		held, used := k.heldAndAttached("e2e-ns-drill", "203.0.113.224/28")

		for _, ns := range []string{kindNamespace, holdsNamespace} {
			require.NoError(t, k.k.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
		}
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			for _, ns := range []string{kindNamespace, holdsNamespace} {
				err := k.k.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
				assert.True(c, apierrors.IsNotFound(err), "namespace %s is gone", ns)
			}
		}, podWait, tick, "the namespaces are gone (nothing of the driver's holds them up)")
		assertNothingStuck(t, k)

		// With no driver and no hold, a tenant's plain Service asks MetalLB
		// for any address: the class's addresses are not for it.
		k.service("bystander", "")
		assert.Equal(t, []string{used.Address}, k.ingressOf("web"), "the attached Service keeps its IP without the driver")

		_, err := charted.InstallDriver(ctx, nil)
		require.NoError(t, err)
		for _, ip := range k.ingressOf("bystander") {
			assert.NotContains(t, []string{held.Address, used.Address}, ip, "no other Service got a claimed address")
		}
		k.storyGoesOn(held, used)
	})
}

// heldAndAttached makes a Retain class over cidr and two claims of it:
// "held", held by a placeholder, and "used", attached to Service web.
func (k *kit) heldAndAttached(class, cidr string) (held, used iadv1alpha1.ClaimedAddress) {
	k.t.Helper()
	k.class(class, iadv1alpha1.ReclaimRetain, cidr)
	k.claim("held", class, iadv1alpha1.FamilyIPv4)
	k.claim("used", class, iadv1alpha1.FamilyIPv4)
	held, used = k.bound("held")[0], k.bound("used")[0]
	k.held(held, iadv1alpha1.AddressBound)
	k.service("web", "used")
	k.attached("web", used)
	return held, used
}

// storyGoesOn, after the driver came back (heldAndAttached): both claims
// kept their addresses, held and attached as they were; then the attached
// one detaches to its hold and the held one attaches to Service web2.
func (k *kit) storyGoesOn(held, used iadv1alpha1.ClaimedAddress) {
	k.t.Helper()
	assert.Equal(k.t, held, k.bound("held")[0], "the held claim keeps its address")
	assert.Equal(k.t, used, k.bound("used")[0], "the used claim keeps its address")
	k.held(held, iadv1alpha1.AddressBound)
	k.attached("web", used)
	k.unannotate("web")
	k.held(used, iadv1alpha1.AddressBound)
	k.service("web2", "held")
	k.attached("web2", held)
}

// previousLineChart is the last commit whose chart rendered the sharing-key
// Secret itself (with helm.sh/resource-policy: keep), the release line a
// `helm upgrade` to this chart comes from.
const previousLineChart = "649792833262f69dd9c855783fa7e5f726fabc30"

// TestUpgradeFromTheRenderedKeyLine: `helm upgrade` from the chart of the
// previous release line, which rendered the sharing key into a Secret of
// its own, to this one, whose controllers read that same Secret: the key's
// bytes are unchanged and the addresses keep their IPs.
func TestUpgradeFromTheRenderedKeyLine(t *testing.T) {
	needChart(t)
	story(t, "upgrade from the rendered-key chart", "the sharing key the previous chart rendered is kept", "key-upgrade", func(ctx context.Context, t *testing.T, cfg *envconf.Config, k *kit) {
		dir := previousChart(t)
		key := client.ObjectKey{Namespace: kindNamespace, Name: driverRelease + "-sharing-key"}
		require.NoError(t, charted.UninstallDriver())
		// The previous chart renders the Secret itself and would not adopt
		// the one the controllers made.
		require.NoError(t, client.IgnoreNotFound(k.k.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})))
		_, err := charted.installChart(ctx, dir, driverRelease, kindNamespace, charted.driverValues(nil))
		require.NoError(t, err, "install the previous line's chart")

		held, used := k.heldAndAttached("e2e-key-upgrade", "203.0.113.240/29")
		rendered := &corev1.Secret{}
		require.NoError(t, k.k.Get(ctx, key, rendered))
		before := rendered.Data[sharingkey.Field]
		require.NotEmpty(t, before)

		_, err = charted.UpgradeDriver(ctx, nil)
		require.NoError(t, err, "helm upgrade to this chart")
		for _, c := range cluster.Controllers {
			k.settled(c)
		}
		after := &corev1.Secret{}
		require.NoError(t, k.k.Get(ctx, key, after))
		assert.Equal(t, before, after.Data[sharingkey.Field], "the key's bytes are unchanged")
		k.storyGoesOn(held, used)
		k.noWarnings(nil)
	})
}

// previousChart writes the chart of previousLineChart, from this
// repository's history, into a temporary directory.
func previousChart(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("git", "archive", previousLineChart, "chart/metallb-iad")
	cmd.Dir = manifests.Root()
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	require.NoError(t, cmd.Run(), "git archive %s (a clone with history): %s", previousLineChart, stderr.String())
	dir := t.TempDir()
	tr := tar.NewReader(&out)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			require.NoError(t, os.MkdirAll(p, 0o755))
		case tar.TypeReg:
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			b, err := io.ReadAll(tr)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(p, b, 0o644))
		}
	}
	return filepath.Join(dir, "chart", "metallb-iad")
}
