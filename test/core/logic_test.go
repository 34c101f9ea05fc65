package core

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
)

const (
	v4 = iadv1alpha1.FamilyIPv4
	v6 = iadv1alpha1.FamilyIPv6
)

func addr(name, ip, class string, phase iadv1alpha1.IPAddressPhase, ref *iadv1alpha1.ClaimReference) iadv1alpha1.IPAddress {
	return iadv1alpha1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       iadv1alpha1.IPAddressSpec{Address: ip, ClassName: class, ClaimRef: ref},
		Status:     iadv1alpha1.IPAddressStatus{Phase: phase},
	}
}

func claimOf(family iadv1alpha1.IPFamily) *iadv1alpha1.IPAddressClaim {
	return &iadv1alpha1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "u1", Generation: 3},
		Spec:       iadv1alpha1.IPAddressClaimSpec{Family: family},
	}
}

func class(name, provisioner string, isDefault bool) iadv1alpha1.IPAddressClass {
	c := iadv1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: iadv1alpha1.IPAddressClassSpec{Provisioner: provisioner}}
	if isDefault {
		c.Annotations = map[string]string{iadv1alpha1.DefaultClassAnnotation: "true"}
	}
	return c
}

func TestFamilyOf(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want iadv1alpha1.IPFamily
		ok   bool
	}{
		{"192.0.2.7", v4, true},
		{"2001:db8::7", v6, true},
		{"::ffff:192.0.2.7", v4, true},
		{" 10.0.0.1 ", v4, true},
		{"fe80::1%eth0", "", false},
		{"192.0.2.0/24", "", false},
		{"not-an-ip", "", false},
		{"", "", false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, ok := familyOf(tc.in)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestCollected(t *testing.T) {
	c := claimOf(v4)
	ref := &iadv1alpha1.ClaimReference{Namespace: "ns", Name: "c", UID: "u1"}
	live := addr("a", "192.0.2.1", "x", iadv1alpha1.AddressBound, ref)
	deleting := addr("b", "192.0.2.2", "x", iadv1alpha1.AddressBound, ref)
	deleting.DeletionTimestamp = &metav1.Time{}
	assert.True(t, collected(&live, c))
	assert.False(t, collected(&deleting, c), "an address being deleted is dropped, as in the real core")
	other := addr("c", "192.0.2.3", "x", iadv1alpha1.AddressBound, &iadv1alpha1.ClaimReference{Namespace: "ns", Name: "d"})
	assert.False(t, collected(&other, c))
}

func TestHeldBy(t *testing.T) {
	c := claimOf(v4)
	for _, tc := range []struct {
		name string
		ref  *iadv1alpha1.ClaimReference
		want bool
	}{
		{"no claimRef", nil, false},
		{"same claim, uid empty", &iadv1alpha1.ClaimReference{Namespace: "ns", Name: "c"}, true},
		{"same claim, same uid", &iadv1alpha1.ClaimReference{Namespace: "ns", Name: "c", UID: "u1"}, true},
		{"same name, stale uid", &iadv1alpha1.ClaimReference{Namespace: "ns", Name: "c", UID: "u0"}, false},
		{"other namespace", &iadv1alpha1.ClaimReference{Namespace: "other", Name: "c"}, false},
		{"other name", &iadv1alpha1.ClaimReference{Namespace: "ns", Name: "d"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := addr("a", "192.0.2.1", "x", "", tc.ref)
			assert.Equal(t, tc.want, heldBy(&a, c))
		})
	}
}

func TestMissingFamilies(t *testing.T) {
	ok4 := addr("a4", "192.0.2.1", "x", iadv1alpha1.AddressBound, nil)
	ok6 := addr("a6", "2001:db8::1", "x", iadv1alpha1.AddressBound, nil)
	lost4 := addr("l4", "192.0.2.2", "x", iadv1alpha1.AddressLost, nil)
	bad := addr("bad", "nope", "x", iadv1alpha1.AddressPending, nil)
	conflict6 := addr("c6", "2001:db8::2", "x", iadv1alpha1.AddressConflict, nil)
	for _, tc := range []struct {
		name      string
		family    iadv1alpha1.IPFamily
		collected []iadv1alpha1.IPAddress
		want      []iadv1alpha1.IPFamily
	}{
		{"empty family defaults to IPv4", "", nil, []iadv1alpha1.IPFamily{v4}},
		{"IPv4 satisfied", v4, []iadv1alpha1.IPAddress{ok4}, nil},
		{"IPv4 by a v6 address only", v4, []iadv1alpha1.IPAddress{ok6}, []iadv1alpha1.IPFamily{v4}},
		{"IPv6 satisfied", v6, []iadv1alpha1.IPAddress{ok6}, nil},
		{"Dual, nothing", iadv1alpha1.FamilyDual, nil, []iadv1alpha1.IPFamily{v4, v6}},
		{"Dual, v4 only", iadv1alpha1.FamilyDual, []iadv1alpha1.IPAddress{ok4}, []iadv1alpha1.IPFamily{v6}},
		{"Dual, both", iadv1alpha1.FamilyDual, []iadv1alpha1.IPAddress{ok6, ok4}, nil},
		{"Lost does not satisfy", v4, []iadv1alpha1.IPAddress{lost4}, []iadv1alpha1.IPFamily{v4}},
		{"Lost plus a good one", v4, []iadv1alpha1.IPAddress{lost4, ok4}, nil},
		{"Conflict still satisfies", v6, []iadv1alpha1.IPAddress{conflict6}, nil},
		{"unparsable satisfies nothing", v4, []iadv1alpha1.IPAddress{bad}, []iadv1alpha1.IPFamily{v4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, missingFamilies(tc.family, tc.collected))
		})
	}
}

func TestResolveClass(t *testing.T) {
	a := class("a", "p.a", false)
	b := class("b", "p.b", true)
	d1 := class("d1", "p.d", true)
	for _, tc := range []struct {
		name        string
		spec        string
		status      string
		classes     []iadv1alpha1.IPAddressClass
		wantClass   string
		wantReason  string
		wantMessage string
	}{
		{"spec names a class", "a", "", []iadv1alpha1.IPAddressClass{a, b}, "a", iadv1alpha1.ReasonResolved, `IPAddressClass "a", provisioner "p.a"`},
		{"spec wins over status", "a", "b", []iadv1alpha1.IPAddressClass{a, b}, "a", iadv1alpha1.ReasonResolved, `IPAddressClass "a", provisioner "p.a"`},
		{"status is sticky over the default", "", "a", []iadv1alpha1.IPAddressClass{a, b}, "a", iadv1alpha1.ReasonResolved, `IPAddressClass "a", provisioner "p.a"`},
		{"single default", "", "", []iadv1alpha1.IPAddressClass{a, b}, "b", iadv1alpha1.ReasonResolved, `IPAddressClass "b", provisioner "p.b"`},
		{"spec names a missing class", "zz", "", []iadv1alpha1.IPAddressClass{a, b}, "", iadv1alpha1.ReasonClassNotFound, `IPAddressClass "zz" does not exist`},
		{"status names a deleted class", "", "gone", []iadv1alpha1.IPAddressClass{a, b}, "", iadv1alpha1.ReasonClassNotFound, `IPAddressClass "gone" does not exist`},
		{"no default", "", "", []iadv1alpha1.IPAddressClass{a}, "", iadv1alpha1.ReasonNoDefaultClass, "the claim names no class and no IPAddressClass is marked as the default"},
		{"no classes at all", "", "", nil, "", iadv1alpha1.ReasonNoDefaultClass, "the claim names no class and no IPAddressClass is marked as the default"},
		{"two defaults", "", "", []iadv1alpha1.IPAddressClass{d1, a, b}, "", iadv1alpha1.ReasonMultipleDefaultClasses,
			"the claim names no class and several IPAddressClasses are marked as the default (b, d1); name one in spec.className"},
		{"two defaults do not matter when named", "a", "", []iadv1alpha1.IPAddressClass{d1, a, b}, "a", iadv1alpha1.ReasonResolved, `IPAddressClass "a", provisioner "p.a"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := claimOf(v4)
			c.Spec.ClassName, c.Status.ClassName = tc.spec, tc.status
			res := resolveClass(c, tc.classes)
			if tc.wantClass == "" {
				assert.Nil(t, res.Class)
			} else {
				require.NotNil(t, res.Class)
				assert.Equal(t, tc.wantClass, res.Class.Name)
			}
			assert.Equal(t, tc.wantReason, res.Reason)
			assert.Equal(t, tc.wantMessage, res.Message)
		})
	}
}

func TestResolveClassIgnoresOtherAnnotationValues(t *testing.T) {
	c := class("a", "p", false)
	c.Annotations = map[string]string{iadv1alpha1.DefaultClassAnnotation: "True"}
	res := resolveClass(claimOf(v4), []iadv1alpha1.IPAddressClass{c})
	assert.Equal(t, iadv1alpha1.ReasonNoDefaultClass, res.Reason)
}

func TestPickCandidate(t *testing.T) {
	avail := iadv1alpha1.AddressAvailable
	ref := &iadv1alpha1.ClaimReference{Namespace: "o", Name: "o"}
	deleting := addr("a-0", "192.0.2.1", "x", avail, nil)
	deleting.DeletionTimestamp = &metav1.Time{}
	for _, tc := range []struct {
		name        string
		family      iadv1alpha1.IPFamily
		addressName string
		addrs       []iadv1alpha1.IPAddress
		want        string
	}{
		{"none", v4, "", nil, ""},
		{"smallest name wins", v4, "", []iadv1alpha1.IPAddress{
			addr("b", "192.0.2.1", "x", avail, nil), addr("a-2", "192.0.2.2", "x", avail, nil), addr("a-10", "192.0.2.3", "x", avail, nil),
		}, "a-10"},
		{"only Available", v4, "", []iadv1alpha1.IPAddress{
			addr("a", "192.0.2.1", "x", iadv1alpha1.AddressReleased, nil), addr("b", "192.0.2.2", "x", iadv1alpha1.AddressPending, nil),
			addr("c", "192.0.2.3", "x", "", nil), addr("d", "192.0.2.4", "x", avail, nil),
		}, "d"},
		{"Available with a claimRef (stale) is skipped", v4, "", []iadv1alpha1.IPAddress{
			addr("a", "192.0.2.1", "x", avail, ref), addr("b", "192.0.2.2", "x", avail, nil),
		}, "b"},
		{"being deleted is skipped", v4, "", []iadv1alpha1.IPAddress{deleting, addr("a-1", "192.0.2.2", "x", avail, nil)}, "a-1"},
		{"other class is skipped", v4, "", []iadv1alpha1.IPAddress{
			addr("a", "192.0.2.1", "y", avail, nil), addr("b", "192.0.2.2", "x", avail, nil),
		}, "b"},
		{"family must match", v6, "", []iadv1alpha1.IPAddress{
			addr("a", "192.0.2.1", "x", avail, nil), addr("b", "2001:db8::1", "x", avail, nil),
		}, "b"},
		{"no address of the family", v6, "", []iadv1alpha1.IPAddress{addr("a", "192.0.2.1", "x", avail, nil)}, ""},
		{"addressName alone", v4, "b", []iadv1alpha1.IPAddress{
			addr("a", "192.0.2.1", "x", avail, nil), addr("b", "192.0.2.2", "x", avail, nil),
		}, "b"},
		{"addressName not Available", v4, "b", []iadv1alpha1.IPAddress{
			addr("a", "192.0.2.1", "x", avail, nil), addr("b", "192.0.2.2", "x", iadv1alpha1.AddressBound, ref),
		}, ""},
		{"addressName of the other family", v6, "b", []iadv1alpha1.IPAddress{addr("b", "192.0.2.2", "x", avail, nil)}, ""},
		{"addressName of another class is never bound", v4, "b", []iadv1alpha1.IPAddress{addr("b", "192.0.2.2", "y", avail, nil)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := claimOf(tc.family)
			c.Spec.AddressName = tc.addressName
			got := pickCandidate(c, tc.family, "x", tc.addrs)
			if tc.want == "" {
				assert.Nil(t, got)
				return
			}
			require.NotNil(t, got)
			assert.Equal(t, tc.want, got.Name)
		})
	}
}

func TestClaimStatus(t *testing.T) {
	b4 := addr("ip-b", "192.0.2.1", "x", iadv1alpha1.AddressBound, nil)
	b6 := addr("ip-a", "2001:db8::1", "x", iadv1alpha1.AddressBound, nil)
	lost4 := addr("ip-l", "192.0.2.9", "x", iadv1alpha1.AddressLost, nil)
	cls := class("x", "p", false)
	ok := &resolution{Class: &cls, Reason: iadv1alpha1.ReasonResolved, Message: "resolved"}
	notFound := &resolution{Reason: iadv1alpha1.ReasonClassNotFound, Message: "missing"}

	for _, tc := range []struct {
		name          string
		family        iadv1alpha1.IPFamily
		prevPhase     iadv1alpha1.IPAddressClaimPhase
		prevClass     string
		collected     []iadv1alpha1.IPAddress
		res           *resolution
		wantPhase     iadv1alpha1.IPAddressClaimPhase
		wantClass     string
		wantAddresses []iadv1alpha1.ClaimedAddress
		wantBound     metav1.Condition
		wantResolved  *metav1.Condition
	}{
		{
			name: "nothing yet", family: v4, res: ok,
			wantPhase: iadv1alpha1.ClaimPending, wantClass: "x",
			wantBound:    metav1.Condition{Status: metav1.ConditionFalse, Reason: iadv1alpha1.ReasonWaitingForProvisioning, Message: "waiting for an address of family IPv4"},
			wantResolved: &metav1.Condition{Status: metav1.ConditionTrue, Reason: iadv1alpha1.ReasonResolved, Message: "resolved"},
		},
		{
			name: "class not found keeps the sticky class", family: iadv1alpha1.FamilyDual, prevClass: "old", res: notFound,
			wantPhase: iadv1alpha1.ClaimPending, wantClass: "old",
			wantBound:    metav1.Condition{Status: metav1.ConditionFalse, Reason: iadv1alpha1.ReasonWaitingForProvisioning, Message: "waiting for an address of family IPv4 and IPv6"},
			wantResolved: &metav1.Condition{Status: metav1.ConditionFalse, Reason: iadv1alpha1.ReasonClassNotFound, Message: "missing"},
		},
		{
			name: "bound, addresses sorted by name", family: iadv1alpha1.FamilyDual, prevClass: "x",
			collected: []iadv1alpha1.IPAddress{b4, b6},
			wantPhase: iadv1alpha1.ClaimBound, wantClass: "x",
			wantAddresses: []iadv1alpha1.ClaimedAddress{{Name: "ip-a", Address: "2001:db8::1"}, {Name: "ip-b", Address: "192.0.2.1"}},
			wantBound:     metav1.Condition{Status: metav1.ConditionTrue, Reason: iadv1alpha1.ReasonBound, Message: "every requested family is bound: 2001:db8::1, 192.0.2.1"},
		},
		{
			name: "previously Bound, address Lost", family: v4, prevPhase: iadv1alpha1.ClaimBound, prevClass: "x",
			collected: []iadv1alpha1.IPAddress{lost4}, res: ok,
			wantPhase: iadv1alpha1.ClaimLost, wantClass: "x",
			wantAddresses: []iadv1alpha1.ClaimedAddress{{Name: "ip-l", Address: "192.0.2.9"}},
			wantBound:     metav1.Condition{Status: metav1.ConditionFalse, Reason: iadv1alpha1.ReasonAddressLost, Message: "the backend lost bound address ip-l (192.0.2.9)"},
			wantResolved:  &metav1.Condition{Status: metav1.ConditionTrue, Reason: iadv1alpha1.ReasonResolved, Message: "resolved"},
		},
		{
			name: "stays Lost", family: v4, prevPhase: iadv1alpha1.ClaimLost, prevClass: "x",
			collected: []iadv1alpha1.IPAddress{lost4}, res: ok,
			wantPhase: iadv1alpha1.ClaimLost, wantClass: "x",
			wantAddresses: []iadv1alpha1.ClaimedAddress{{Name: "ip-l", Address: "192.0.2.9"}},
			wantBound:     metav1.Condition{Status: metav1.ConditionFalse, Reason: iadv1alpha1.ReasonAddressLost, Message: "the backend lost bound address ip-l (192.0.2.9)"},
			wantResolved:  &metav1.Condition{Status: metav1.ConditionTrue, Reason: iadv1alpha1.ReasonResolved, Message: "resolved"},
		},
		{
			name: "Lost address but never Bound is Pending", family: v4, prevPhase: iadv1alpha1.ClaimPending,
			collected: []iadv1alpha1.IPAddress{lost4}, res: ok,
			wantPhase: iadv1alpha1.ClaimPending, wantClass: "x",
			wantAddresses: []iadv1alpha1.ClaimedAddress{{Name: "ip-l", Address: "192.0.2.9"}},
			wantBound:     metav1.Condition{Status: metav1.ConditionFalse, Reason: iadv1alpha1.ReasonWaitingForProvisioning, Message: "waiting for an address of family IPv4"},
			wantResolved:  &metav1.Condition{Status: metav1.ConditionTrue, Reason: iadv1alpha1.ReasonResolved, Message: "resolved"},
		},
		{
			name: "Lost recovered", family: v4, prevPhase: iadv1alpha1.ClaimLost, prevClass: "x",
			collected: []iadv1alpha1.IPAddress{b4},
			wantPhase: iadv1alpha1.ClaimBound, wantClass: "x",
			wantAddresses: []iadv1alpha1.ClaimedAddress{{Name: "ip-b", Address: "192.0.2.1"}},
			wantBound:     metav1.Condition{Status: metav1.ConditionTrue, Reason: iadv1alpha1.ReasonBound, Message: "every requested family is bound: 192.0.2.1"},
		},
		{
			name: "previously Bound, address gone (not Lost) is Lost, as in the real core", family: v4, prevPhase: iadv1alpha1.ClaimBound, prevClass: "x", res: ok,
			wantPhase: iadv1alpha1.ClaimLost, wantClass: "x",
			wantBound:    metav1.Condition{Status: metav1.ConditionFalse, Reason: iadv1alpha1.ReasonAddressLost, Message: "no address of family IPv4 is bound any more"},
			wantResolved: &metav1.Condition{Status: metav1.ConditionTrue, Reason: iadv1alpha1.ReasonResolved, Message: "resolved"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := claimOf(tc.family)
			c.Status.Phase, c.Status.ClassName = tc.prevPhase, tc.prevClass
			st := claimStatus(c, tc.collected, tc.res)
			assert.Equal(t, tc.wantPhase, st.Phase)
			assert.Equal(t, tc.wantClass, st.ClassName)
			assert.Equal(t, tc.wantAddresses, st.Addresses)

			bound := meta.FindStatusCondition(st.Conditions, iadv1alpha1.ClaimConditionBound)
			require.NotNil(t, bound)
			assert.Equal(t, tc.wantBound.Status, bound.Status)
			assert.Equal(t, tc.wantBound.Reason, bound.Reason)
			assert.Equal(t, tc.wantBound.Message, bound.Message)
			assert.Equal(t, int64(3), bound.ObservedGeneration)

			resolved := meta.FindStatusCondition(st.Conditions, iadv1alpha1.ClaimConditionClassResolved)
			if tc.wantResolved == nil {
				assert.Nil(t, resolved)
				return
			}
			require.NotNil(t, resolved)
			assert.Equal(t, tc.wantResolved.Status, resolved.Status)
			assert.Equal(t, tc.wantResolved.Reason, resolved.Reason)
			assert.Equal(t, tc.wantResolved.Message, resolved.Message)
		})
	}
}

func TestClaimStatusKeepsUntouchedConditions(t *testing.T) {
	c := claimOf(v4)
	c.Status.Phase = iadv1alpha1.ClaimBound
	c.Status.ClassName = "x"
	old := metav1.Condition{Type: iadv1alpha1.ClaimConditionClassResolved, Status: metav1.ConditionTrue, Reason: iadv1alpha1.ReasonResolved,
		Message: "earlier", ObservedGeneration: 1, LastTransitionTime: metav1.Unix(100, 0)}
	c.Status.Conditions = []metav1.Condition{old}
	st := claimStatus(c, []iadv1alpha1.IPAddress{addr("a", "192.0.2.1", "x", iadv1alpha1.AddressBound, nil)}, nil)
	assert.Equal(t, &old, meta.FindStatusCondition(st.Conditions, iadv1alpha1.ClaimConditionClassResolved))
	// The claim's own status is not modified in place.
	assert.Len(t, c.Status.Conditions, 1)
}

func TestStateOf(t *testing.T) {
	live := &iadv1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{UID: types.UID("u1")}}
	deleting := live.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{}
	for _, tc := range []struct {
		name  string
		claim *iadv1alpha1.IPAddressClaim
		uid   string
		want  claimState
	}{
		{"missing", nil, "u1", claimAbsent},
		{"live, same uid", live, "u1", claimHolds},
		{"live, other uid", live, "u0", claimAbsent},
		{"live, no uid", live, "", claimAbsent},
		{"deleting, same uid", deleting, "u1", claimDeleting},
		{"deleting, other uid", deleting, "u0", claimAbsent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, stateOf(tc.claim, tc.uid))
		})
	}
}

func TestDecideAddress(t *testing.T) {
	withUID := &iadv1alpha1.ClaimReference{Namespace: "ns", Name: "c", UID: "u1"}
	noUID := &iadv1alpha1.ClaimReference{Namespace: "ns", Name: "c"}
	for _, tc := range []struct {
		name  string
		ip    string
		phase iadv1alpha1.IPAddressPhase
		ref   *iadv1alpha1.ClaimReference
		state claimState
		want  addressDecision
	}{
		{"unparsable stays Pending", "nope", "", nil, claimAbsent, addressDecision{Phase: iadv1alpha1.AddressPending}},
		{"unparsable even when bound", "10.0.0.1/32", iadv1alpha1.AddressBound, withUID, claimHolds, addressDecision{Phase: iadv1alpha1.AddressPending}},
		{"Conflict is the driver's", "192.0.2.1", iadv1alpha1.AddressConflict, nil, claimAbsent, addressDecision{}},
		{"Lost is the driver's", "192.0.2.1", iadv1alpha1.AddressLost, withUID, claimAbsent, addressDecision{}},
		{"no claimRef: Available", "192.0.2.1", "", nil, claimAbsent, addressDecision{Phase: iadv1alpha1.AddressAvailable}},
		{"recycled Released: Available", "192.0.2.1", iadv1alpha1.AddressReleased, nil, claimAbsent, addressDecision{Phase: iadv1alpha1.AddressAvailable}},
		{"uid empty: wait", "192.0.2.1", "", noUID, claimAbsent, addressDecision{}},
		{"live claim: Bound", "2001:db8::1", iadv1alpha1.AddressAvailable, withUID, claimHolds, addressDecision{Phase: iadv1alpha1.AddressBound}},
		{"claim being deleted: wait", "192.0.2.1", iadv1alpha1.AddressBound, withUID, claimDeleting, addressDecision{}},
		{"claim gone: reclaim", "192.0.2.1", iadv1alpha1.AddressBound, withUID, claimAbsent, addressDecision{Reclaim: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := addr("a", tc.ip, "x", tc.phase, tc.ref)
			assert.Equal(t, tc.want, decideAddress(&a, tc.state))
		})
	}
}

func TestLiveClaimHolds(t *testing.T) {
	ref := &iadv1alpha1.ClaimReference{Namespace: "ns", Name: "c", UID: "u1"}
	for _, tc := range []struct {
		name  string
		phase iadv1alpha1.IPAddressPhase
		ref   *iadv1alpha1.ClaimReference
		state claimState
		want  bool
	}{
		{"Bound to a live claim", iadv1alpha1.AddressBound, ref, claimHolds, true},
		{"Bound, claim being deleted", iadv1alpha1.AddressBound, ref, claimDeleting, false},
		{"Bound, claim gone or other uid", iadv1alpha1.AddressBound, ref, claimAbsent, false},
		{"Released", iadv1alpha1.AddressReleased, ref, claimHolds, false},
		{"Available", iadv1alpha1.AddressAvailable, nil, claimAbsent, false},
		{"Lost", iadv1alpha1.AddressLost, ref, claimHolds, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := addr("a", "192.0.2.1", "x", tc.phase, tc.ref)
			assert.Equal(t, tc.want, liveClaimHolds(&a, tc.state))
		})
	}
}

func TestReclaimAction(t *testing.T) {
	for _, tc := range []struct {
		name         string
		policy       iadv1alpha1.ReclaimPolicy
		phase        iadv1alpha1.IPAddressPhase
		del, release bool
	}{
		{"Delete", iadv1alpha1.ReclaimDelete, iadv1alpha1.AddressBound, true, false},
		{"Delete even when Lost", iadv1alpha1.ReclaimDelete, iadv1alpha1.AddressLost, true, false},
		{"Retain releases", iadv1alpha1.ReclaimRetain, iadv1alpha1.AddressBound, false, true},
		{"empty policy is Retain", "", iadv1alpha1.AddressBound, false, true},
		{"Retain, already Released", iadv1alpha1.ReclaimRetain, iadv1alpha1.AddressReleased, false, false},
		{"Retain releases over Conflict, as the real core does", iadv1alpha1.ReclaimRetain, iadv1alpha1.AddressConflict, false, true},
		{"Retain releases over Lost, as the real core does", iadv1alpha1.ReclaimRetain, iadv1alpha1.AddressLost, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := addr("a", "192.0.2.1", "x", tc.phase, nil)
			a.Spec.ReclaimPolicy = tc.policy
			del, release := reclaimAction(&a)
			assert.Equal(t, tc.del, del)
			assert.Equal(t, tc.release, release)
		})
	}
}

func TestTakeSkipsAddressesBeingBound(t *testing.T) {
	avail := iadv1alpha1.AddressAvailable
	candidates := []iadv1alpha1.IPAddress{
		addr("a-1", "10.0.0.1", "x", avail, nil),
		addr("a-2", "10.0.0.2", "x", avail, nil),
		addr("a-3", "10.0.0.3", "x", avail, nil),
	}
	r := &claimReconciler{}
	first, second := claimOf(iadv1alpha1.FamilyIPv4), claimOf(iadv1alpha1.FamilyIPv4)
	first.UID, second.UID = "uid-1", "uid-2"

	// Two claims reconciled at once: the second takes the next address, not
	// the one the first is binding.
	require.Equal(t, "a-1", r.take(first, iadv1alpha1.FamilyIPv4, "x", candidates).Name)
	require.Equal(t, "a-2", r.take(second, iadv1alpha1.FamilyIPv4, "x", candidates).Name)
	// The first bound a-1 (or failed): a-1 is free to take again.
	r.binding.Delete("a-1")
	require.Equal(t, "a-1", r.take(second, iadv1alpha1.FamilyIPv4, "x", candidates).Name)
	require.Equal(t, "a-3", r.take(first, iadv1alpha1.FamilyIPv4, "x", candidates).Name)
	// Every candidate is being bound: nothing to take.
	require.Nil(t, r.take(claimOf(iadv1alpha1.FamilyIPv4), iadv1alpha1.FamilyIPv4, "x", candidates))
	// The caller's list is left as it was.
	var names []string
	for _, c := range candidates {
		names = append(names, c.Name)
	}
	require.Equal(t, []string{"a-1", "a-2", "a-3"}, names)
}
