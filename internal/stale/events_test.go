package stale

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cozystack/metallb-iad/internal/names"
)

func TestLatestFailure(t *testing.T) {
	at := func(sec int) metav1.Time { return metav1.Time{Time: time.Unix(int64(1000+sec), 0)} }
	ev := func(reason, uid, msg string, sec int) corev1.Event {
		return corev1.Event{Reason: reason, Message: msg, LastTimestamp: at(sec), InvolvedObject: corev1.ObjectReference{UID: types.UID(uid)}}
	}
	evs := []corev1.Event{
		ev(AllocationFailed, "u1", "old", 1),
		ev(AllocationFailed, "u1", "new", 5),
		ev(names.MetalLBIPAllocated, "u1", "allocated", 9),
		ev(AllocationFailed, "u0", "an earlier Service of that name", 9),
		{Reason: AllocationFailed, Message: "series", InvolvedObject: corev1.ObjectReference{UID: "u1"},
			EventTime: metav1.NewMicroTime(at(2).Time), Series: &corev1.EventSeries{LastObservedTime: metav1.NewMicroTime(at(3).Time)}},
	}
	assert.Equal(t, "new", LatestFailure(evs, "u1").Message)
	assert.Nil(t, LatestFailure(evs, "u2"))
	assert.Nil(t, LatestFailure(nil, "u1"))
}

func TestRefusalKinds(t *testing.T) {
	assert.True(t, UnknownPool(`Failed to allocate IP for "ph/alloc-ipv4-x": unknown pool "iad-public"`))
	assert.False(t, UnknownPool(`Failed to allocate IP for "ph/alloc-ipv4-x": no available IPs`))
	assert.True(t, NamesHolders(`can't change sharing key for "shop/api", address also in use by shop/web`))
	assert.False(t, NamesHolders(`port TCP/9 is already in use on "10.0.0.2"`))
}

func TestHolders(t *testing.T) {
	alloc := []types.NamespacedName{{Namespace: "ph", Name: "alloc-ipv4-u1"}}
	tests := []struct {
		name string
		msg  string
		want []types.NamespacedName
	}{
		{"one named", `Failed to allocate IP for "ph/hold-ip-10-0-0-2": can't change sharing key for "ph/hold-ip-10-0-0-2", address also in use by shop/web`,
			[]types.NamespacedName{{Namespace: "shop", Name: "web"}}},
		{"several named", `can't change sharing key for "shop/api", address also in use by ph/alloc-ipv4-x,shop/web`,
			[]types.NamespacedName{{Namespace: "ph", Name: "alloc-ipv4-x"}, {Namespace: "shop", Name: "web"}}},
		{"port taken on the address: same key, the claim's allocation placeholder", `port TCP/9 is already in use on "10.0.0.2"`, alloc},
		{"port taken on another address", `port TCP/9 is already in use on "10.0.0.3"`, nil},
		{"pool exhausted", `no available IPs`, nil},
		{"not allowed", `["10.0.0.2"] is not allowed in config`, nil},
		{"malformed name", `address also in use by web`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Holders(tt.msg, "10.0.0.2", alloc))
		})
	}
}

func TestAssignedTo(t *testing.T) {
	ev := func(reason, ns, name, msg string) corev1.Event {
		return corev1.Event{Reason: reason, Message: msg, InvolvedObject: corev1.ObjectReference{Namespace: ns, Name: name}}
	}
	self := types.NamespacedName{Namespace: "ph", Name: "hold-ip6-x"}
	evs := []corev1.Event{
		ev(names.MetalLBIPAllocated, "ph", "alloc-ipv6-a", `Assigned IP ["fd00:77::4"]`),
		ev(names.MetalLBIPAllocated, "ph", "alloc-ipv6-a", `Assigned IP ["fd00:77::4"]`),
		ev(names.MetalLBIPAllocated, "ph", "alloc-ipv6-b", `Assigned IP ["fd00:77::44"]`),
		ev(names.MetalLBIPAllocated, "ph", "hold-ip6-x", `Assigned IP ["fd00:77::4"]`),
		ev(AllocationFailed, "ph", "alloc-ipv6-c", `port TCP/9 is already in use on "fd00:77::4"`),
		ev(names.MetalLBIPAllocated, "ph", "alloc-ipv6-d", `Assigned IP ["10.0.0.1", "fd00:77::4"]`),
	}
	assert.Equal(t, []types.NamespacedName{{Namespace: "ph", Name: "alloc-ipv6-a"}, {Namespace: "ph", Name: "alloc-ipv6-d"}},
		AssignedTo(evs, "fd00:77::4", self, 8))
	assert.Len(t, AssignedTo(evs, "fd00:77::4", self, 1), 1, "bounded")
}

func TestQuotedAddresses(t *testing.T) {
	assert.Equal(t, []string{"10.0.0.1"}, quotedAddresses(`Assigned IP ["10.0.0.1"]`))
	assert.Equal(t, []string{"10.0.0.1", "fd00::1"}, quotedAddresses(`Assigned IP ["10.0.0.1","fd00::1"]`))
	assert.Equal(t, []string{"fd00::1"}, quotedAddresses(`Assigned IP ["FD00:0::1"]`), "in the ledger's form")
	assert.Empty(t, quotedAddresses(`Assigned IP []`))
	assert.Empty(t, quotedAddresses(`pool "iad-a" has no free address`))
}

func TestAssignments(t *testing.T) {
	at := func(sec int) metav1.Time { return metav1.Time{Time: time.Unix(int64(1000+sec), 0)} }
	ev := func(ns, name, reason, msg string, sec int) corev1.Event {
		return corev1.Event{Reason: reason, Message: msg, LastTimestamp: at(sec), ObjectMeta: metav1.ObjectMeta{Namespace: ns},
			InvolvedObject: corev1.ObjectReference{Kind: "Service", Namespace: ns, Name: name}}
	}
	forged := ev("tenant-a", "forged", names.MetalLBIPAllocated, `Assigned IP ["10.0.0.5"]`, 1)
	forged.InvolvedObject.Namespace = "tenant-b"
	pod := ev("iad", "pod", names.MetalLBIPAllocated, `Assigned IP ["10.0.0.6"]`, 1)
	pod.InvolvedObject.Kind = "Pod"
	evs := []corev1.Event{
		ev("iad", "a", names.MetalLBIPAllocated, `Assigned IP ["10.0.0.1"]`, 1),
		ev("iad", "a", names.MetalLBIPAllocated, `Assigned IP ["10.0.0.2"]`, 5),
		ev("iad", "a", names.MetalLBIPAllocated, `Assigned IP ["10.0.0.3"]`, 3),
		ev("iad", "b", AllocationFailed, `Failed to allocate IP for "iad/b": "10.0.0.4"`, 1),
		ev("iad", "dual", names.MetalLBIPAllocated, `Assigned IP ["10.0.0.7","fd00::7"]`, 1),
		ev("iad", "skipped", names.MetalLBIPAllocated, `Assigned IP ["10.0.0.9"]`, 1),
		forged, pod,
	}
	got := Assignments(evs, func(ip string) bool { return ip != "10.0.0.9" })
	ips := map[types.NamespacedName]string{}
	for k, v := range got {
		ips[k] = v.IP
	}
	assert.Equal(t, map[types.NamespacedName]string{{Namespace: "iad", Name: "a"}: "10.0.0.2", {Namespace: "iad", Name: "dual"}: "10.0.0.7"}, ips,
		"the latest assignment of each Service that keep accepts; no refusals, other kinds or forged namespaces")
	assert.True(t, at(5).Time.Equal(got[types.NamespacedName{Namespace: "iad", Name: "a"}].At))
}
