package stale

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestLatestFailure(t *testing.T) {
	at := func(sec int) metav1.Time { return metav1.Time{Time: time.Unix(int64(1000+sec), 0)} }
	ev := func(reason, uid, msg string, sec int) corev1.Event {
		return corev1.Event{Reason: reason, Message: msg, LastTimestamp: at(sec), InvolvedObject: corev1.ObjectReference{UID: types.UID(uid)}}
	}
	evs := []corev1.Event{
		ev(AllocationFailed, "u1", "old", 1),
		ev(AllocationFailed, "u1", "new", 5),
		ev(ReasonIPAllocated, "u1", "allocated", 9),
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
		ev(ReasonIPAllocated, "ph", "alloc-ipv6-a", `Assigned IP ["fd00:77::4"]`),
		ev(ReasonIPAllocated, "ph", "alloc-ipv6-a", `Assigned IP ["fd00:77::4"]`),
		ev(ReasonIPAllocated, "ph", "alloc-ipv6-b", `Assigned IP ["fd00:77::44"]`),
		ev(ReasonIPAllocated, "ph", "hold-ip6-x", `Assigned IP ["fd00:77::4"]`),
		ev(AllocationFailed, "ph", "alloc-ipv6-c", `port TCP/9 is already in use on "fd00:77::4"`),
		ev(ReasonIPAllocated, "ph", "alloc-ipv6-d", `Assigned IP ["10.0.0.1", "fd00:77::4"]`),
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
	forged := ev("tenant-a", "forged", ReasonIPAllocated, `Assigned IP ["10.0.0.5"]`, 1)
	forged.InvolvedObject.Namespace = "tenant-b"
	pod := ev("iad", "pod", ReasonIPAllocated, `Assigned IP ["10.0.0.6"]`, 1)
	pod.InvolvedObject.Kind = "Pod"
	evs := []corev1.Event{
		ev("iad", "a", ReasonIPAllocated, `Assigned IP ["10.0.0.1"]`, 1),
		ev("iad", "a", ReasonIPAllocated, `Assigned IP ["10.0.0.2"]`, 5),
		ev("iad", "a", ReasonIPAllocated, `Assigned IP ["10.0.0.3"]`, 3),
		ev("iad", "b", AllocationFailed, `Failed to allocate IP for "iad/b": "10.0.0.4"`, 1),
		ev("iad", "dual", ReasonIPAllocated, `Assigned IP ["10.0.0.7","fd00::7"]`, 1),
		ev("iad", "skipped", ReasonIPAllocated, `Assigned IP ["10.0.0.9"]`, 1),
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

func TestRefusalOf(t *testing.T) {
	at := func(sec int) metav1.Time { return metav1.Time{Time: time.Unix(int64(1000+sec), 0)} }
	ev := func(name, uid, rv, msg string, count int32, sec int) corev1.Event {
		return corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name}, Reason: AllocationFailed, Message: msg, Count: count, LastTimestamp: at(sec),
			InvolvedObject: corev1.ObjectReference{UID: types.UID(uid), ResourceVersion: rv}}
	}
	// A fresh Service (version 100) MetalLB had no address for, then
	// pinned by the driver (version 104).
	fresh := ev("web.1", "u1", "100", "no available IPs", 1, 0)
	tests := []struct {
		name      string
		evs       []corev1.Event
		rv        string
		earlier   map[string]int32
		want      string
		ahead     bool
		wantEarly map[string]int32
	}{
		{"nothing said", nil, "104", nil, "", false, nil},
		{"a refusal of the fresh Service before the pin, in the same second: no refusal of the pin", []corev1.Event{fresh}, "104", nil,
			"", false, map[string]int32{"web.1": 1}},
		{"the same refusal repeated before the pin was seen: still none", []corev1.Event{ev("web.1", "u1", "100", "no available IPs", 3, 0)}, "104",
			nil, "", false, map[string]int32{"web.1": 3}},
		{"a refusal of the pinned version", []corev1.Event{fresh, ev("web.2", "u1", "104", "not allowed", 1, 0)}, "104", nil,
			"not allowed", false, map[string]int32{"web.1": 1}},
		{"a refusal of the pinned version with the cache behind", []corev1.Event{ev("web.2", "u1", "106", "not allowed", 1, 0)}, "104", nil,
			"", true, nil},
		{"a refusal first said about an earlier version, said again since the records", []corev1.Event{ev("web.2", "u1", "90", "not allowed", 3, 9)}, "104",
			map[string]int32{"web.2": 2}, "not allowed", false, map[string]int32{"web.2": 3}},
		{"... and not said again", []corev1.Event{ev("web.2", "u1", "90", "not allowed", 2, 9)}, "104",
			map[string]int32{"web.2": 2}, "", false, map[string]int32{"web.2": 2}},
		{"... an Event missing from the records is no repeat", []corev1.Event{ev("web.3", "u1", "90", "not allowed", 4, 9)}, "104",
			map[string]int32{"web.2": 2}, "", false, map[string]int32{"web.3": 4}},
		{"an earlier Service of that name", []corev1.Event{ev("web.2", "u0", "104", "not allowed", 1, 0)}, "104", nil, "", false, nil},
		{"no version named", []corev1.Event{ev("web.2", "u1", "", "not allowed", 1, 0)}, "104", nil, "", false, nil},
		{"the latest of two refusals of the pin", []corev1.Event{ev("web.2", "u1", "104", "first", 1, 1), ev("web.3", "u1", "105", "second", 1, 2)}, "105", nil,
			"second", false, map[string]int32{"web.2": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := RefusalOf(tt.evs, "u1", tt.rv, tt.earlier)
			msg := ""
			if got.Event != nil {
				msg = got.Event.Message
			}
			assert.Equal(t, tt.want, msg)
			assert.Equal(t, tt.ahead, got.Ahead)
			assert.Equal(t, tt.wantEarly, got.Earlier)
		})
	}
}

func TestSaid(t *testing.T) {
	assert.Equal(t, int32(1), Said(&corev1.Event{}))
	assert.Equal(t, int32(4), Said(&corev1.Event{Count: 4}))
	assert.Equal(t, int32(7), Said(&corev1.Event{Count: 1, Series: &corev1.EventSeries{Count: 7}}))
}
