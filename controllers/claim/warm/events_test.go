package warm

import (
	"testing"

	"github.com/stretchr/testify/assert"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
)

func TestWarmEventMessages(t *testing.T) {
	a := warmAddr("ip-10-0-0-1", "10.0.0.1", &iadv1alpha1.ClaimReference{Namespace: "t", Name: "x"}, iadv1alpha1.AddressBound, false)
	assert.Equal(t, "Recorded warm IPv4 address 10.0.0.1 as Available IPAddress ip-10-0-0-1", msgWarmRecorded(iadv1alpha1.FamilyIPv4, "10.0.0.1", "ip-10-0-0-1"))
	assert.Equal(t, "The class's IPv6 ranges have no room for the 3 warm addresses asked for; the driver keeps what fits and asks MetalLB for no more",
		msgWarmPoolFull(iadv1alpha1.FamilyIPv6, 3))
	assert.Equal(t, "Deleted warm address 10.0.0.1 (IPAddress ip-10-0-0-1, bound to no claim): the class's addresses no longer contain it", msgWarmDropped(&a))
	assert.Equal(t, "MetalLB gave a warm placeholder IPv4 address 10.0.0.1, which IPAddress ip-10-0-0-1 records (bound to claim t/x); "+
		"the driver gave it back and allocates another", msgWarmReturned(iadv1alpha1.FamilyIPv4, "10.0.0.1", &a))
}
