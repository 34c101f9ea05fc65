package class

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
)

func TestMsgRendered(t *testing.T) {
	class := &iadv1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "public"}}
	p := parsed(t, `{"addresses": ["192.0.2.0/28", "2001:db8::/120"], "advertisement": "BGP"}`)
	pool, adv := Render(class, p, "metallb-system")
	assert.Equal(t, "IPAddressPool metallb-system/iad-public with 192.0.2.0/28, 2001:db8::/120, announced by BGPAdvertisement iad-public: "+
		"created IPAddressPool iad-public, removed L2Advertisement iad-public",
		msgRendered("metallb-system", pool, adv, p, []string{"created IPAddressPool iad-public", "removed L2Advertisement iad-public"}))
}
