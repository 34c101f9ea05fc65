package claim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	classparams "github.com/cozystack/metallb-iad/controllers/class"
	"github.com/cozystack/metallb-iad/internal/names"
)

func TestQuotedAddresses(t *testing.T) {
	assert.Equal(t, []string{"10.0.0.1"}, quotedAddresses(`Assigned IP ["10.0.0.1"]`))
	assert.Equal(t, []string{"10.0.0.1", "fd00::1"}, quotedAddresses(`Assigned IP ["10.0.0.1","fd00::1"]`))
	assert.Equal(t, []string{"fd00::1"}, quotedAddresses(`Assigned IP ["FD00:0::1"]`), "in the ledger's form")
	assert.Empty(t, quotedAddresses(`Assigned IP []`))
	assert.Empty(t, quotedAddresses(`pool "iad-a" has no free address`))
}

func TestStaleHolders(t *testing.T) {
	v4, err := classparams.ParseAddressRange("10.77.3.0-10.77.3.7")
	require.NoError(t, err)
	v6, err := classparams.ParseAddressRange("fd00:77:3::/125")
	require.NoError(t, err)
	ranges := []classparams.AddressRange{v4, v6}
	ev := func(name, reason, msg string) corev1.Event {
		return corev1.Event{Reason: reason, Message: msg,
			InvolvedObject: corev1.ObjectReference{Kind: "Service", Namespace: "iad", Name: name}}
	}
	evs := []corev1.Event{
		ev("warm-ipv4-a", names.MetalLBIPAllocated, `Assigned IP ["10.77.3.0"]`),
		ev("hold-ip-10-77-3-5", names.MetalLBIPAllocated, `Assigned IP ["10.77.3.5"]`),
		ev("alloc-ipv4-b", MetalLBAllocationFailed, `Failed to allocate IP for "iad/alloc-ipv4-b": no available IPs`),
		ev("other-pool", names.MetalLBIPAllocated, `Assigned IP ["10.99.0.1"]`),
		ev("warm-ipv6-c", names.MetalLBIPAllocated, `Assigned IP ["fd00:77:3::2"]`),
		ev("dual", names.MetalLBIPAllocated, `Assigned IP ["10.77.3.1","fd00:77:3::1"]`),
	}
	ledger := map[string]bool{"10.77.3.5": true}
	key := func(n string) types.NamespacedName { return types.NamespacedName{Namespace: "iad", Name: n} }

	ips := func(m map[types.NamespacedName]assignment) map[types.NamespacedName]string {
		out := map[types.NamespacedName]string{}
		for k, v := range m {
			out[k] = v.ip
		}
		return out
	}
	assert.Equal(t, map[types.NamespacedName]string{key("warm-ipv4-a"): "10.77.3.0", key("dual"): "10.77.3.1"},
		ips(staleHolders(evs, iadv1alpha1.FamilyIPv4, ranges, ledger)),
		"free IPv4 addresses of the class only: not the ledger's, not another pool's, not a refusal")
	assert.Equal(t, map[types.NamespacedName]string{key("warm-ipv6-c"): "fd00:77:3::2", key("dual"): "fd00:77:3::1"},
		ips(staleHolders(evs, iadv1alpha1.FamilyIPv6, ranges, ledger)))
	assert.Empty(t, staleHolders(evs, iadv1alpha1.FamilyIPv4, ranges,
		map[string]bool{"10.77.3.0": true, "10.77.3.1": true, "10.77.3.5": true}), "every address in the ledger")
}

func TestStaleMemoClearsANameOncePerAssignment(t *testing.T) {
	var m staleMemo
	a, b := types.NamespacedName{Namespace: "iad", Name: "a"}, types.NamespacedName{Namespace: "iad", Name: "b"}
	t0 := time.Now()
	assigned := t0.Add(-time.Minute)
	assert.True(t, m.due(a, assigned, t0), "never cleared")
	assert.False(t, m.due(a, assigned, t0.Add(time.Hour)), "cleared for that assignment already")
	assert.True(t, m.due(b, assigned, t0), "another name")
	assert.True(t, m.due(a, t0.Add(time.Minute), t0.Add(2*time.Minute)), "a later assignment")
	assert.True(t, m.due(types.NamespacedName{Namespace: "iad", Name: "c"}, t0, t0.Add(staleForget+time.Minute)))
	assert.Len(t, m.at, 2, "clears older than staleForget are forgotten")
}
