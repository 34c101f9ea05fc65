package class

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestToWithdraw(t *testing.T) {
	obj := func(name string) client.Object {
		return &metallbv1beta1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	names := func(objs []client.Object) []string {
		var out []string
		for _, o := range objs {
			out = append(out, o.GetName())
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		candidates []client.Object
		kept       map[string]bool
		want       []string
	}{
		{"none", nil, nil, nil},
		{"kept ones stay", []client.Object{obj("iad-a"), obj("iad-old")}, map[string]bool{"L2Advertisement/iad-a": true}, []string{"iad-old"}},
		{"found by label and by name: deleted once", []client.Object{obj("iad-a"), obj("iad-a")}, nil, []string{"iad-a"}},
		{"a kept name of another kind does not keep this one", []client.Object{obj("iad-a")}, map[string]bool{"BGPAdvertisement/iad-a": true}, []string{"iad-a"}},
	} {
		assert.Equal(t, tc.want, names(toWithdraw("L2Advertisement", tc.candidates, tc.kept)), tc.name)
	}
}
