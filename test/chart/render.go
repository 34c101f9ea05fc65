// Package chart renders the project's Helm chart (chart/metallb-iad)
// in-process with Helm's Go packages, as `helm template` would, and returns
// the objects. Its tests check the chart; other suites use Render to install
// pieces of it on the local control plane.
package chart

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/cozystack/metallb-iad/test/manifests"
)

// Dir is the chart's directory.
func Dir() string { return filepath.Join(manifests.Root(), "chart", "metallb-iad") }

// Release names the release a render is for.
type Release struct {
	// Name is the release name; "metallb-iad" if empty.
	Name string
	// Namespace is the release namespace; "metallb-iad-system" if empty.
	Namespace string
	// WithoutAdmissionPolicyAPI renders as for an API server that does not
	// serve ValidatingAdmissionPolicy (Kubernetes 1.29) but serves MetalLB's
	// API: a real cluster, too old for the admission policy.
	WithoutAdmissionPolicyAPI bool
	// NoCluster renders with helm's built-in capabilities alone, as
	// `helm template` does without a cluster (its Kubernetes version is
	// helm's compiled-in default, 1.20 for a helm built from source).
	NoCluster bool
}

// Rendered is the result of one render.
type Rendered struct {
	// Objects are every object of every template, in file order.
	Objects []*unstructured.Unstructured
	// Notes is the rendered NOTES.txt.
	Notes string
}

// Render renders the chart with values (YAML, merged over values.yaml, and
// checked against values.schema.json like `helm install` does).
func Render(rel Release, values string) (*Rendered, error) {
	ch, err := loader.Load(Dir())
	if err != nil {
		return nil, err
	}
	return RenderChart(ch, rel, values)
}

// RenderChart renders a loaded chart (a packaged one, say) as Render does.
func RenderChart(ch *chart.Chart, rel Release, values string) (*Rendered, error) {
	if rel.Name == "" {
		rel.Name = "metallb-iad"
	}
	if rel.Namespace == "" {
		rel.Namespace = "metallb-iad-system"
	}
	vals := map[string]any{}
	if err := yaml.Unmarshal([]byte(values), &vals); err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	// Helm's built-in default Kubernetes version is 1.20 when its packages
	// are used as a library (its CLI stamps its own client version); render
	// as for the Kubernetes version of our client libraries instead.
	caps := &chartutil.Capabilities{
		KubeVersion: chartutil.KubeVersion{Version: "v1.35.0", Major: "1", Minor: "35"},
		APIVersions: chartutil.DefaultCapabilities.APIVersions,
		HelmVersion: chartutil.DefaultCapabilities.HelmVersion,
	}
	switch {
	case rel.NoCluster:
		caps = chartutil.DefaultCapabilities.Copy()
	case rel.WithoutAdmissionPolicyAPI:
		c := *caps
		c.KubeVersion = chartutil.KubeVersion{Version: "v1.29.0", Major: "1", Minor: "29"}
		c.APIVersions = chartutil.VersionSet{"metallb.io/v1beta1", "metallb.io/v1beta1/IPAddressPool"}
		for _, v := range caps.APIVersions {
			if !strings.HasPrefix(v, "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy") {
				c.APIVersions = append(c.APIVersions, v)
			}
		}
		caps = &c
	}
	top, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{
		Name:      rel.Name,
		Namespace: rel.Namespace,
		Revision:  1,
		IsInstall: true,
	}, caps)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(ch, top)
	if err != nil {
		return nil, err
	}

	out := &Rendered{}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		switch {
		case strings.HasSuffix(p, "NOTES.txt"):
			out.Notes = files[p]
			continue
		case !strings.HasSuffix(p, ".yaml"):
			continue
		}
		objs, err := decode(files[p])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out.Objects = append(out.Objects, objs...)
	}
	return out, nil
}

// decode splits a multi-document YAML stream into objects, skipping empty
// documents.
func decode(text string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(text)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		m := map[string]any{}
		// utilyaml keeps whole numbers as int64, as the API machinery does.
		if err := utilyaml.Unmarshal(doc, &m); err != nil {
			return nil, fmt.Errorf("%w in:\n%s", err, doc)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// Find returns the objects of a kind, in render order.
func (r *Rendered) Find(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range r.Objects {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// Get returns the object of a kind and name, or nil.
func (r *Rendered) Get(kind, name string) *unstructured.Unstructured {
	for _, o := range r.Objects {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}
