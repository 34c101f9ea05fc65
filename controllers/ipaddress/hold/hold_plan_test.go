package hold

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/placeholder"
	"github.com/cozystack/metallb-iad/internal/sharingkey"
)

const planIP = "192.0.2.7"

// refs returns pointers to the Services given.
func refs(list ...corev1.Service) []*corev1.Service {
	out := make([]*corev1.Service, len(list))
	for i := range list {
		out[i] = &list[i]
	}
	return out
}

// shared is an address bound to t/c and attached to t/web.
func shared() *iadv1alpha1.IPAddress {
	return associated(bound(address("ip-192-0-2-7", planIP), "t", "c"), "t", "web")
}

// view is the hold's view of address a, with the Services given.
func view(a *iadv1alpha1.IPAddress, park parkOpt, placeholders, holders []corev1.Service, attached, attaching *corev1.Service) *holdView {
	return &holdView{addr: a, ip: a.Spec.Address, key: sharingkey.Keys{}.Of(a), placeholderNamespace: phNS, park: park,
		cached: placeholders, placeholders: placeholders, holders: holders, attached: attached, attaching: attaching}
}

// said is a verdict on Held in words (heldWords), nil for none.
func said(v *heldVerdict) *heldState {
	if v == nil {
		return nil
	}
	h := heldWords(v, planIP, "gold", "parking")
	return &h
}

// saidPlan is a holdPlan with its verdict in words.
type saidPlan struct {
	Create       bool
	Repair       []*corev1.Service
	Key          string
	Delete, Park []*corev1.Service
	Held         *heldState
	TakenBy      *corev1.Service
	Parking      bool
}

func sayPlan(p holdPlan) saidPlan {
	return saidPlan{p.Create, p.Repair, p.Key, p.Delete, p.Park, said(p.Held), p.TakenBy, p.Parking}
}

// waiting is Held Unknown, waiting for MetalLB with msg.
func waiting(msg string) *heldState {
	return &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB, msg}
}

func heldBy(ph string) *heldState {
	return &heldState{metav1.ConditionTrue, conditions.ReasonHeldByPlaceholder, "MetalLB assigned 192.0.2.7 to placeholder Service " + ph}
}

func sharedWith(ph string) *heldState {
	return &heldState{metav1.ConditionTrue, conditions.ReasonSharedWithWorkload,
		"MetalLB assigned 192.0.2.7 to placeholder Service " + ph + ", which shares it with Service t/web, " +
			"the address is attached to (shared attachment): detaching or deleting that Service leaves the address held"}
}

// releasedParked is Held once the parked hold moved off the address.
var releasedParked = &heldState{metav1.ConditionFalse, conditions.ReasonReleasedForWorkload,
	"No placeholder holds the address: it is released for Service t/web; the hold waits in the parking pool parking and comes back on detach"}

var releasedForWeb = &heldState{metav1.ConditionFalse, conditions.ReasonReleasedForWorkload,
	"No placeholder holds the address: it is released for Service t/web"}

func TestLook(t *testing.T) {
	a := bound(address("ip-192-0-2-7", planIP), "t", "c")
	hold := svc(phNS, "hold", planIP, planIP, marks.KeyPool, "parking")
	marks.Edit(&hold, func(m *marks.Marks) { m.Grant = "gold" })
	parked := svc(phNS, "parked", "", "240.0.0.1", marks.KeyPool, "parking")
	other := svc("t", "web", "192.0.2.8", planIP)
	p := look(view(a, parkOpt{Pool: "parking"}, []corev1.Service{hold, deleting(parked)}, []corev1.Service{hold, other}, nil, nil))
	all := func(seen) bool { return true }
	assert.Equal(t, []string{phNS + "/hold", phNS + "/parked"}, svcNames(services(p.phs, all)))
	assert.Equal(t, []string{phNS + "/hold"}, svcNames(services(p.live, all)), "the deleting one is left out")
	assert.Equal(t, []string{phNS + "/hold", "t/web"}, svcNames(services(p.hs, all)))
	assert.Equal(t, seen{Service: p.phs[0].Service, marks: marks.Of(&hold), holds: true, pinned: true, granted: true, own: true}, p.phs[0])
	assert.True(t, p.phs[1].parked, "asks for the parking pool and no address")
	assert.False(t, p.phs[1].holds)
	assert.True(t, p.hs[0].own, "a holder that is one of the placeholders")
	assert.Equal(t, seen{Service: p.hs[1].Service, marks: marks.Of(&other), holds: true}, p.hs[1])
	assert.Equal(t, sharingkey.Keys{}.Of(a), p.key)
}

func TestPlanRecording(t *testing.T) {
	ph := recording("claim-uid", planIP)
	tests := []struct {
		name string
		addr *iadv1alpha1.IPAddress
		want *heldState
	}{
		{"unattached: held by the allocation placeholder", bound(address("ip-192-0-2-7", planIP), "t", "c"), heldBy(phNS + "/alloc-ipv4-claim-uid")},
		{"attached meanwhile: waiting for the hand-over", shared(), waiting(
			"MetalLB assigned 192.0.2.7 to the claim's allocation placeholder iad-system/alloc-ipv4-claim-uid, which is being handed over to this address")},
	}
	for _, tt := range tests {
		p := look(view(tt.addr, parkOpt{}, nil, nil, nil, nil)).planRecording(&ph)
		assert.Equal(t, tt.want, said(p.Held), tt.name)
		assert.Equal(t, saidPlan{Held: tt.want}, sayPlan(p), tt.name)
	}
}

func TestPlanMissing(t *testing.T) {
	imported := bound(address("ip-192-0-2-7", planIP), "t", "c")
	imported.Labels = map[string]string{marks.LabelImported: "true"}
	importer := svc("t", "web", "", planIP, iadv1alpha1.ServiceClaimAnnotation, "c", marks.KeyImportedInto, "c")
	asker := svc("t", "web", "", "", iadv1alpha1.ServiceClaimAnnotation, "c")
	creating := waiting("Waiting for MetalLB to assign 192.0.2.7 to placeholder Service iad-system/hold-ip-192-0-2-7")
	tests := []struct {
		name      string
		addr      *iadv1alpha1.IPAddress
		holders   []corev1.Service
		attaching *corev1.Service
		want      saidPlan
	}{
		{"a hold without a key", bound(address("ip-192-0-2-7", planIP), "t", "c"), nil, nil, saidPlan{Create: true, Held: creating}},
		{"a hold with the key for a Service about to share", bound(address("ip-192-0-2-7", planIP), "t", "c"), nil, &asker,
			saidPlan{Create: true, Key: sharingkey.Keys{}.Claim("t", "c", "claim-uid"), Held: creating}},
		{"imported from its holder: no hold", imported, []corev1.Service{importer}, nil, saidPlan{Held: &heldState{metav1.ConditionUnknown, conditions.ReasonImporting,
			"Service t/web holds 192.0.2.7 and is being imported into the address's claim; it keeps the address, so no placeholder is created"}}},
	}
	for _, tt := range tests {
		got := look(view(tt.addr, parkOpt{}, nil, tt.holders, nil, tt.attaching)).planMissing()
		assert.Equal(t, tt.want, sayPlan(got), tt.name)
	}
}

func TestSurplus(t *testing.T) {
	holder, idle, alsoHolds := svc(phNS, "a", planIP, planIP), svc(phNS, "b", planIP, ""), svc(phNS, "c", planIP, planIP)
	tests := []struct {
		name string
		live []corev1.Service
		want []string
	}{
		{"only the holder", []corev1.Service{holder}, nil},
		{"an idle one goes", []corev1.Service{holder, idle}, []string{phNS + "/b"}},
		{"another holding one stays", []corev1.Service{holder, alsoHolds, idle}, []string{phNS + "/b"}},
	}
	for _, tt := range tests {
		p := look(view(address("ip-192-0-2-7", planIP), parkOpt{}, tt.live, nil, nil, nil))
		assert.Equal(t, tt.want, svcNames(p.surplus(p.live[0].Service)), tt.name)
	}
}

// name is a Service's key, "" for none.
func name(s *corev1.Service) string {
	if s == nil {
		return ""
	}
	return s.Namespace + "/" + s.Name
}

func TestRepairsAndHolder(t *testing.T) {
	a := address("ip-192-0-2-7", planIP)
	granted := func(s corev1.Service) corev1.Service {
		marks.Edit(&s, func(m *marks.Marks) { m.Grant = "gold" })
		return s
	}
	tests := []struct {
		name   string
		live   []corev1.Service
		key    string
		repair []string
		holder string
	}{
		{"right and holding", []corev1.Service{granted(svc(phNS, "a", planIP, planIP))}, "", nil, phNS + "/a"},
		{"wrong pin", []corev1.Service{granted(svc(phNS, "a", "192.0.2.8", ""))}, "", []string{phNS + "/a"}, ""},
		{"no grant label", []corev1.Service{svc(phNS, "a", planIP, planIP)}, "", []string{phNS + "/a"}, phNS + "/a"},
		{"the key missing", []corev1.Service{granted(svc(phNS, "a", planIP, ""))}, "k", []string{phNS + "/a"}, ""},
		{"the first holder counts", []corev1.Service{granted(svc(phNS, "a", planIP, "")), granted(svc(phNS, "b", planIP, planIP)), granted(svc(phNS, "c", planIP, planIP))}, "", nil, phNS + "/b"},
	}
	for _, tt := range tests {
		repair, holder := look(view(a, parkOpt{}, tt.live, nil, nil, nil)).repairsAndHolder(tt.key)
		assert.Equal(t, tt.repair, svcNames(repair), tt.name)
		assert.Equal(t, tt.holder, name(holder), tt.name)
	}
}

// TestPlanHoldConfirms: the reads the plan asks of the API server before
// it is applied.
func TestPlanHoldConfirms(t *testing.T) {
	unattached := bound(address("ip-192-0-2-7", planIP), "t", "c")
	hold, idle := svc(phNS, "hold", planIP, planIP), svc(phNS, "idle", planIP, "")
	gap := svc("t", "web", planIP, "", marks.KeyPinnedBy, "c")
	tests := []struct {
		name string
		view *holdView
		want confirmation
	}{
		{"the gap handoff drops the hold: read the address and the Service again",
			view(shared(), parkOpt{}, []corev1.Service{hold}, []corev1.Service{hold}, &gap, nil), confirmAttached},
		{"so does the parked one",
			view(shared(), parkOpt{Pool: "parking", Open: true}, []corev1.Service{hold}, []corev1.Service{hold}, &gap, nil), confirmAttached},
		{"a shared attachment's surplus: no re-read",
			view(shared(), parkOpt{}, []corev1.Service{hold, idle}, []corev1.Service{hold}, ptr.To(sharingWorkload(planIP, planIP)), nil), 0},
		{"an unattached address's surplus: no re-read",
			view(unattached, parkOpt{}, []corev1.Service{hold, idle}, []corev1.Service{hold}, nil, nil), 0},
		{"a hold to create: look for a placeholder, or an allocation placeholder, the cache missed",
			view(unattached, parkOpt{}, nil, nil, nil, nil), confirmPlaceholders | confirmRecording},
		{"reporting the hold released: look for a placeholder the cache missed",
			view(shared(), parkOpt{}, nil, nil, &gap, nil), confirmPlaceholders},
		{"released already: no re-read",
			view(reportingReleased(shared()), parkOpt{}, nil, nil, &gap, nil), 0},
		{"held: no re-read",
			view(unattached, parkOpt{}, []corev1.Service{hold}, []corev1.Service{hold}, nil, nil), 0},
	}
	for _, tt := range tests {
		for i := range tt.view.placeholders {
			marks.Edit(&tt.view.placeholders[i], func(m *marks.Marks) { m.Grant = "gold" })
		}
		assert.Equal(t, tt.want, planHold(tt.view).Confirm, tt.name)
	}
}

func TestRightfulHolder(t *testing.T) {
	attached, attaching := sharingWorkload(planIP, planIP), sharingWorkload(planIP, "")
	plain := svc("t", "web", "", "", iadv1alpha1.ServiceClaimAnnotation, "c")
	unattached := bound(address("ip-192-0-2-7", planIP), "t", "c")
	tests := []struct {
		name                string
		addr                *iadv1alpha1.IPAddress
		attached, attaching *corev1.Service
		want                *corev1.Service
	}{
		{"attached: the attached Service", shared(), &attached, nil, &attached},
		{"a shared handoff attaching: the Service being attached", unattached, nil, &attaching, &attaching},
		{"a gap handoff attaching: none", unattached, nil, &plain, nil},
		{"nothing", unattached, nil, nil, nil},
	}
	for _, tt := range tests {
		v := view(tt.addr, parkOpt{}, nil, nil, tt.attached, tt.attaching)
		assert.Same(t, tt.want, rightfulHolder(v, sharingkey.Keys{}.Of(tt.addr)), tt.name)
	}
}

// TestPlanHold is one long table: the holding invariant case by case.
func TestPlanHold(t *testing.T) {
	const ip = "192.0.2.7"
	const hold = "hold-ip-192-0-2-7"
	// heldByHold is the Held condition of an address its hold holds.
	heldByHold := &heldState{metav1.ConditionTrue, conditions.ReasonHeldByPlaceholder,
		"MetalLB assigned 192.0.2.7 to placeholder Service iad-system/hold-ip-192-0-2-7"}
	type want struct {
		create  bool
		repair  []string
		delete  []string
		park    []string
		held    *heldState
		takenBy string
		// key, when set, is the sharing key the plan gives the
		// placeholders ("none" for no key).
		key string
	}
	asker := func(annotations ...string) *corev1.Service {
		s := svc("t", "web", "", "", append([]string{iadv1alpha1.ServiceClaimAnnotation, "c"}, annotations...)...)
		return &s
	}
	claimKey := sharingkey.Keys{}.Claim("t", "c", "claim-uid")
	open := parkOpt{Pool: "parking", Open: true}
	// parked is the hold moved to the parking pool, MetalLB showing ingress.
	parked := func(ingress string) corev1.Service {
		return svc(phNS, hold, "", ingress, marks.KeyPool, "parking")
	}
	tests := []struct {
		name         string
		addr         *iadv1alpha1.IPAddress
		park         parkOpt
		placeholders []corev1.Service
		holders      []corev1.Service
		// keepKeys leaves the placeholders' sharing keys as written;
		// otherwise each placeholder without one gets the binding's.
		keepKeys bool
		// ungranted leaves the placeholders without the grant label.
		ungranted bool
		// attached is the Service associatedTo names, as the cache shows it.
		attached *corev1.Service
		// attaching is the Service the attach grant names.
		attaching *corev1.Service
		want      want
	}{
		{
			name: "fresh address: create the hold, wait for MetalLB",
			addr: address("ip-192-0-2-7", ip),
			want: want{create: true, held: &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB,
				"Waiting for MetalLB to assign 192.0.2.7 to placeholder Service iad-system/hold-ip-192-0-2-7"}},
		},
		{
			name:         "hold placeholder assigned exactly the address: held",
			addr:         address("ip-192-0-2-7", ip),
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip)},
			holders:      []corev1.Service{svc(phNS, hold, ip, ip)},
			want:         want{held: heldByHold},
		},
		{
			name:         "the claim's allocation placeholder, once labelled, counts",
			addr:         bound(address("ip-192-0-2-7", ip), "t", "c"),
			placeholders: []corev1.Service{svc(phNS, "alloc-ipv4-u1", ip, ip)},
			holders:      []corev1.Service{svc(phNS, "alloc-ipv4-u1", ip, ip)},
			want: want{held: &heldState{metav1.ConditionTrue, conditions.ReasonHeldByPlaceholder,
				"MetalLB assigned 192.0.2.7 to placeholder Service iad-system/alloc-ipv4-u1"}},
		},
		{
			name:    "the claim's allocation placeholder, not handed over yet, holds: held, no hold created",
			addr:    bound(address("ip-192-0-2-7", ip), "t", "c"),
			holders: []corev1.Service{recording("claim-uid", ip)},
			want: want{held: &heldState{metav1.ConditionTrue, conditions.ReasonHeldByPlaceholder,
				"MetalLB assigned 192.0.2.7 to placeholder Service iad-system/alloc-ipv4-claim-uid"}},
		},
		{
			name:     "attached meanwhile while the allocation placeholder is handed over: wait, do not release",
			addr:     associated(bound(address("ip-192-0-2-7", ip), "t", "c"), "t", "web"),
			holders:  []corev1.Service{recording("claim-uid", ip)},
			attached: func() *corev1.Service { s := svc("t", "web", "", ""); return &s }(),
			want: want{held: &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB,
				"MetalLB assigned 192.0.2.7 to the claim's allocation placeholder iad-system/alloc-ipv4-claim-uid, which is being handed over to this address"}},
		},
		{
			name:    "another claim's allocation placeholder holds: not ours, the hold is created",
			addr:    bound(address("ip-192-0-2-7", ip), "t", "c"),
			holders: []corev1.Service{recording("other-uid", ip)},
			want: want{create: true, key: "none", held: &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB,
				"Waiting for MetalLB to assign 192.0.2.7 to placeholder Service iad-system/hold-ip-192-0-2-7"}},
		},
		{
			name:         "placeholder not assigned yet: waiting",
			addr:         address("ip-192-0-2-7", ip),
			placeholders: []corev1.Service{svc(phNS, hold, ip, "")},
			want: want{held: &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB,
				"Waiting for MetalLB to assign 192.0.2.7 to placeholder Service iad-system/hold-ip-192-0-2-7"}},
		},
		{
			name:         "placeholder assigned another address (pin lost): repaired, not held",
			addr:         address("ip-192-0-2-7", ip),
			placeholders: []corev1.Service{svc(phNS, hold, "", "192.0.2.9")},
			want: want{repair: []string{phNS + "/" + hold}, held: &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB,
				"Waiting for MetalLB to assign 192.0.2.7 to placeholder Service iad-system/hold-ip-192-0-2-7"}},
		},
		{
			name:         "holding placeholder with a wrong pin is repaired and still held",
			addr:         address("ip-192-0-2-7", ip),
			placeholders: []corev1.Service{svc(phNS, hold, "192.0.2.7,192.0.2.8", ip)},
			holders:      []corev1.Service{svc(phNS, hold, "192.0.2.7,192.0.2.8", ip)},
			want:         want{repair: []string{phNS + "/" + hold}, held: heldByHold},
		},
		{
			name: "fresh address of a claim: the hold is created without a key",
			addr: bound(address("ip-192-0-2-7", ip), "t", "c"),
			want: want{create: true, key: "none", held: &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB,
				"Waiting for MetalLB to assign 192.0.2.7 to placeholder Service iad-system/hold-ip-192-0-2-7"}},
		},
		{
			name:      "fresh address whose grant names a Service that can share: the hold is created with the key",
			addr:      bound(address("ip-192-0-2-7", ip), "t", "c"),
			attaching: asker(),
			want: want{create: true, key: claimKey, held: &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB,
				"Waiting for MetalLB to assign 192.0.2.7 to placeholder Service iad-system/hold-ip-192-0-2-7"}},
		},
		{
			name:         "holding placeholder without a sharing key stays keyless and held",
			addr:         bound(address("ip-192-0-2-7", ip), "t", "c"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip)},
			holders:      []corev1.Service{svc(phNS, hold, ip, ip)},
			keepKeys:     true,
			want:         want{held: heldByHold, key: "none"},
		},
		{
			name:         "the grant names a Service that can share: the keyless hold gets the key first",
			addr:         bound(address("ip-192-0-2-7", ip), "t", "c"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip)},
			holders:      []corev1.Service{svc(phNS, hold, ip, ip)},
			keepKeys:     true,
			attaching:    asker(),
			want:         want{repair: []string{phNS + "/" + hold}, held: heldByHold, key: claimKey},
		},
		{
			name:         "a Service hands the address back under the binding's key: the keyless hold gets the key to share it",
			addr:         bound(address("ip-192-0-2-7", ip), "t", "c"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, "")},
			holders:      []corev1.Service{svc("t", "web", ip, ip, marks.KeyPinnedBy, "c", marks.KeySharing, claimKey)},
			keepKeys:     true,
			want: want{repair: []string{phNS + "/" + hold}, key: claimKey, held: &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB,
				"Waiting for MetalLB to let placeholder Service iad-system/hold-ip-192-0-2-7 share 192.0.2.7 with Service t/web, which this address's binding authorizes (shared handoff)"}},
		},
		{
			name:         "the grant names a Service that cannot share (port 9/TCP: the gap handoff): the hold stays keyless",
			addr:         bound(address("ip-192-0-2-7", ip), "t", "c"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip)},
			holders:      []corev1.Service{svc(phNS, hold, ip, ip)},
			keepKeys:     true,
			attaching:    ptr.To(withPort(*asker(), 9)),
			want:         want{held: heldByHold, key: "none"},
		},
		{
			name: "placeholder keyed for another binding (claim uid filled in since) is repaired",
			addr: bound(address("ip-192-0-2-7", ip), "t", "c"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip,
				marks.KeySharing, sharingkey.Keys{}.Claim("t", "c", ""))},
			holders:  []corev1.Service{svc(phNS, hold, ip, ip)},
			keepKeys: true,
			want:     want{repair: []string{phNS + "/" + hold}, held: heldByHold, key: "none"},
		},
		{
			name: "placeholder with the right key and a legacy one too is repaired",
			addr: bound(address("ip-192-0-2-7", ip), "t", "c"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip,
				marks.KeySharing, sharingkey.Keys{}.Claim("t", "c", "claim-uid"), marks.KeyLegacySharing, "x")},
			holders:  []corev1.Service{svc(phNS, hold, ip, ip)},
			keepKeys: true,
			want:     want{repair: []string{phNS + "/" + hold}, held: heldByHold},
		},
		{
			name:         "holding placeholder without the grant label (taken off by hand) gets it and is still held",
			addr:         address("ip-192-0-2-7", ip),
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip)},
			holders:      []corev1.Service{svc(phNS, hold, ip, ip)},
			ungranted:    true,
			want:         want{repair: []string{phNS + "/" + hold}, held: heldByHold},
		},
		{
			name: "placeholder with the claim's key is left alone",
			addr: bound(address("ip-192-0-2-7", ip), "t", "c"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip,
				marks.KeySharing, sharingkey.Keys{}.Claim("t", "c", "claim-uid"))},
			holders:  []corev1.Service{svc(phNS, hold, ip, ip)},
			keepKeys: true,
			want:     want{held: heldByHold},
		},
		{
			name:         "the workload shares the address with the placeholder (shared handoff): held",
			addr:         bound(address("ip-192-0-2-7", ip), "t", "c"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip)},
			holders: []corev1.Service{svc(phNS, hold, ip, ip),
				svc("t", "web", ip, ip, marks.KeyPinnedBy, "c", marks.KeySharing, sharingkey.Keys{}.Claim("t", "c", "claim-uid"))},
			want: want{held: heldByHold},
		},
		{
			name:         "surplus placeholder that does not hold the address is deleted",
			addr:         address("ip-192-0-2-7", ip),
			placeholders: []corev1.Service{svc(phNS, hold, ip, ""), svc(phNS, "alloc-ipv4-u1", ip, ip)},
			holders:      []corev1.Service{svc(phNS, "alloc-ipv4-u1", ip, ip)},
			want: want{delete: []string{phNS + "/" + hold}, held: &heldState{metav1.ConditionTrue, conditions.ReasonHeldByPlaceholder,
				"MetalLB assigned 192.0.2.7 to placeholder Service iad-system/alloc-ipv4-u1"}},
		},
		{
			name:         "only a placeholder being deleted: wait for it to go before creating",
			addr:         address("ip-192-0-2-7", ip),
			placeholders: []corev1.Service{deleting(svc(phNS, hold, ip, ip))},
			want: want{held: &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB,
				"The placeholder of 192.0.2.7 is being deleted; a new one is created once it is gone"}},
		},
		{
			name:         "another Service holds the address without authority: taken elsewhere",
			addr:         bound(address("ip-192-0-2-7", ip), "t", "c"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, "")},
			holders:      []corev1.Service{svc("intruder", "web", ip, ip)},
			want: want{takenBy: "intruder/web", held: &heldState{metav1.ConditionFalse, conditions.ReasonTakenElsewhere,
				"Service intruder/web holds 192.0.2.7 in MetalLB without this address's authority, so the placeholder cannot; " +
					"the driver keeps the placeholder pinned to 192.0.2.7 and never substitutes another address"}},
		},
		{
			// Only a pending claim's unpinned allocation placeholder can get
			// the address (during a gap); its claim controller gives it back.
			name:         "another claim's placeholder holding it: waiting for it to be given back",
			addr:         address("ip-192-0-2-7", ip),
			placeholders: []corev1.Service{svc(phNS, hold, ip, "")},
			holders:      []corev1.Service{svc(phNS, "alloc-ipv4-other", "", ip)},
			want: want{held: &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB,
				"Placeholder Service iad-system/alloc-ipv4-other of another claim got 192.0.2.7 while it was unheld; " +
					"waiting for the claim controller to give it back"}},
		},
		{
			name:         "the claim's own workload still holds it while detaching: waiting, no warning",
			addr:         bound(address("ip-192-0-2-7", ip), "t", "c"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, "")},
			holders:      []corev1.Service{svc("t", "web", ip, ip, iadv1alpha1.ServiceClaimAnnotation, "c", marks.KeyPinnedBy, "c")},
			want: want{held: &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB,
				"Waiting for Service t/web, which this address's binding authorizes, to release 192.0.2.7 to the placeholder"}},
		},
		{
			name:         "the workload carrying the binding's key while detaching: waiting for MetalLB to share",
			addr:         bound(address("ip-192-0-2-7", ip), "t", "c"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, "")},
			holders: []corev1.Service{svc("t", "web", ip, ip, marks.KeyPinnedBy, "c",
				marks.KeySharing, sharingkey.Keys{}.Claim("t", "c", "claim-uid"), marks.KeySharedBy, "c")},
			want: want{held: &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB,
				"Waiting for MetalLB to let placeholder Service iad-system/hold-ip-192-0-2-7 share 192.0.2.7 with Service t/web, which this address's binding authorizes (shared handoff)"}},
		},
		{
			name:         "associated: every live placeholder is deleted, condition left alone",
			addr:         associated(address("ip-192-0-2-7", ip), "t", "web"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip), svc(phNS, "alloc-ipv4-u1", ip, ""), deleting(svc(phNS, "x", ip, ""))},
			want:         want{delete: []string{phNS + "/" + hold, phNS + "/alloc-ipv4-u1"}},
		},
		{
			name:         "associated, a placeholder still terminating: not released yet",
			addr:         associated(address("ip-192-0-2-7", ip), "t", "web"),
			placeholders: []corev1.Service{deleting(svc(phNS, hold, ip, ip))},
			want:         want{},
		},
		{
			name:    "associated and no placeholder: released for the workload",
			addr:    associated(address("ip-192-0-2-7", ip), "t", "web"),
			holders: []corev1.Service{svc("t", "web", ip, ip)},
			want: want{held: &heldState{metav1.ConditionFalse, conditions.ReasonReleasedForWorkload,
				"No placeholder holds the address: it is released for Service t/web"}},
		},
		{
			name:         "shared attachment: the placeholder keeps holding beside the Service",
			addr:         associated(bound(address("ip-192-0-2-7", ip), "t", "c"), "t", "web"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip)},
			holders:      []corev1.Service{svc(phNS, hold, ip, ip), sharingWorkload(ip, ip)},
			attached:     ptr.To(sharingWorkload(ip, ip)),
			want: want{held: &heldState{metav1.ConditionTrue, conditions.ReasonSharedWithWorkload,
				"MetalLB assigned 192.0.2.7 to placeholder Service iad-system/hold-ip-192-0-2-7, which shares it with Service t/web, " +
					"the address is attached to (shared attachment): detaching or deleting that Service leaves the address held"}},
		},
		{
			name:         "shared attachment: a surplus placeholder that does not hold is deleted, a wrong key repaired",
			addr:         associated(bound(address("ip-192-0-2-7", ip), "t", "c"), "t", "web"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip, marks.KeySharing, "old"), svc(phNS, "alloc-ipv4-u1", ip, "")},
			holders:      []corev1.Service{svc(phNS, hold, ip, ip), sharingWorkload(ip, ip)},
			attached:     ptr.To(sharingWorkload(ip, ip)),
			want: want{repair: []string{phNS + "/" + hold}, delete: []string{phNS + "/alloc-ipv4-u1"}, held: &heldState{metav1.ConditionTrue, conditions.ReasonSharedWithWorkload,
				"MetalLB assigned 192.0.2.7 to placeholder Service iad-system/hold-ip-192-0-2-7, which shares it with Service t/web, " +
					"the address is attached to (shared attachment): detaching or deleting that Service leaves the address held"}},
		},
		{
			name:     "shared attachment without a placeholder, the Service holding: a hold is created to share it",
			addr:     associated(bound(address("ip-192-0-2-7", ip), "t", "c"), "t", "web"),
			holders:  []corev1.Service{sharingWorkload(ip, ip)},
			attached: ptr.To(sharingWorkload(ip, ip)),
			want: want{create: true, held: &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB,
				"Waiting for MetalLB to let placeholder Service iad-system/hold-ip-192-0-2-7 share 192.0.2.7 with Service t/web, the address is attached to (shared attachment)"}},
		},
		{
			name:     "shared attachment without a placeholder, the Service not holding yet: released, nothing created",
			addr:     associated(bound(address("ip-192-0-2-7", ip), "t", "c"), "t", "web"),
			attached: ptr.To(sharingWorkload(ip, "")),
			want: want{held: &heldState{metav1.ConditionFalse, conditions.ReasonReleasedForWorkload,
				"No placeholder holds the address: it is released for Service t/web"}},
		},
		{
			name:         "attached Service that cannot share (port 9/TCP) although it carries the key: the placeholder is deleted",
			addr:         associated(bound(address("ip-192-0-2-7", ip), "t", "c"), "t", "web"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip)},
			holders:      []corev1.Service{svc(phNS, hold, ip, ip)},
			attached:     ptr.To(withPort(sharingWorkload(ip, ""), 9)),
			want:         want{delete: []string{phNS + "/" + hold}},
		},
		{
			name:         "attached Service with another key (the gap handoff): the placeholder is deleted",
			addr:         associated(bound(address("ip-192-0-2-7", ip), "t", "c"), "t", "web"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip)},
			holders:      []corev1.Service{svc(phNS, hold, ip, ip)},
			attached:     ptr.To(svc("t", "web", ip, "", marks.KeyPinnedBy, "c")),
			want:         want{delete: []string{phNS + "/" + hold}},
		},
		{
			name:         "attached Service being deleted: the sharing placeholder stays, nothing created or deleted",
			addr:         associated(bound(address("ip-192-0-2-7", ip), "t", "c"), "t", "web"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip)},
			holders:      []corev1.Service{svc(phNS, hold, ip, ip)},
			attached:     ptr.To(deleting(svc("t", "web", ip, ip))),
			want: want{held: &heldState{metav1.ConditionTrue, conditions.ReasonSharedWithWorkload,
				"MetalLB assigned 192.0.2.7 to placeholder Service iad-system/hold-ip-192-0-2-7, which shares it with Service t/web, " +
					"the address is attached to (shared attachment): detaching or deleting that Service leaves the address held"}},
		},
		{
			name:         "attached Service let go in one write (shared): the placeholder stays and keeps its key, nothing created or deleted",
			addr:         associated(bound(address("ip-192-0-2-7", ip), "t", "c"), "t", "web"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip)},
			holders:      []corev1.Service{svc(phNS, hold, ip, ip), svc("t", "web", "", ip)},
			attached:     ptr.To(svc("t", "web", "", ip)),
			want: want{held: &heldState{metav1.ConditionTrue, conditions.ReasonSharedWithWorkload,
				"MetalLB assigned 192.0.2.7 to placeholder Service iad-system/hold-ip-192-0-2-7, which shares it with Service t/web, " +
					"the address is attached to (shared attachment): detaching or deleting that Service leaves the address held"}},
		},
		{
			name:         "attached Service that asks for the claim, not pinned yet (a gap handoff attaching it): the placeholder is deleted",
			addr:         associated(bound(address("ip-192-0-2-7", ip), "t", "c"), "t", "web"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip)},
			holders:      []corev1.Service{svc(phNS, hold, ip, ip)},
			attached:     asker(),
			want:         want{delete: []string{phNS + "/" + hold}},
		},
		{
			name:         "associated, parking open: the hold is parked, not deleted",
			addr:         associated(bound(address("ip-192-0-2-7", ip), "t", "c"), "t", "web"),
			park:         open,
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip)},
			holders:      []corev1.Service{svc(phNS, hold, ip, ip)},
			attached:     asker(),
			want:         want{park: []string{phNS + "/" + hold}},
		},
		{
			name:         "associated, parking open, a Service that could share: parked all the same (no key, no pass)",
			addr:         associated(bound(address("ip-192-0-2-7", ip), "t", "c"), "t", "web"),
			park:         open,
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip)},
			holders:      []corev1.Service{svc(phNS, hold, ip, ip)},
			attached:     ptr.To(withPort(svc("t", "web", "", "", iadv1alpha1.ServiceClaimAnnotation, "c"), 80)),
			want:         want{park: []string{phNS + "/" + hold}},
		},
		{
			name:         "associated, parked, MetalLB has not moved it yet: not released",
			addr:         associated(bound(address("ip-192-0-2-7", ip), "t", "c"), "t", "web"),
			park:         open,
			keepKeys:     true,
			placeholders: []corev1.Service{parked(ip)},
			holders:      []corev1.Service{parked(ip)},
			attached:     asker(),
			want:         want{},
		},
		{
			name:         "associated, parked and moved: released for the workload",
			addr:         associated(bound(address("ip-192-0-2-7", ip), "t", "c"), "t", "web"),
			park:         open,
			keepKeys:     true,
			placeholders: []corev1.Service{parked("240.0.0.1")},
			attached:     asker(),
			want:         want{held: releasedParked},
		},
		{
			name:         "associated, parking closed meanwhile: a parked placeholder is deleted as in the gap handoff",
			addr:         associated(bound(address("ip-192-0-2-7", ip), "t", "c"), "t", "web"),
			park:         parkOpt{Pool: "parking"},
			keepKeys:     true,
			placeholders: []corev1.Service{parked("240.0.0.1")},
			attached:     asker(),
			want:         want{delete: []string{phNS + "/" + hold}},
		},
		{
			name:         "detached, parked, the Service still holding: nothing pinned back yet",
			addr:         bound(address("ip-192-0-2-7", ip), "t", "c"),
			park:         open,
			keepKeys:     true,
			placeholders: []corev1.Service{parked("240.0.0.1")},
			holders:      []corev1.Service{svc("t", "web", "", ip, marks.KeyPinnedBy, "c")},
			want: want{key: "none", held: &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB,
				"Waiting for Service t/web, which this address's binding authorizes, to release 192.0.2.7 to the placeholder"}},
		},
		{
			name:         "detached, parked, nobody holding: pinned back without a key",
			addr:         bound(address("ip-192-0-2-7", ip), "t", "c"),
			park:         open,
			keepKeys:     true,
			placeholders: []corev1.Service{parked("240.0.0.1")},
			want: want{key: "none", repair: []string{phNS + "/" + hold}, held: &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB,
				"Waiting for MetalLB to assign 192.0.2.7 to placeholder Service iad-system/hold-ip-192-0-2-7"}},
		},
		{
			name:         "detached, parked, nobody holding, released for the workload until now: pinned back, Held Unknown at once (False would let the next attach pin)",
			addr:         reportingReleased(bound(address("ip-192-0-2-7", ip), "t", "c")),
			park:         open,
			keepKeys:     true,
			placeholders: []corev1.Service{parked("240.0.0.1")},
			want: want{key: "none", repair: []string{phNS + "/" + hold}, held: &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB,
				"Waiting for MetalLB to assign 192.0.2.7 to placeholder Service iad-system/hold-ip-192-0-2-7"}},
		},
		{
			name:         "attach grant for a Service that could share, parking open: the hold gets no key",
			addr:         bound(address("ip-192-0-2-7", ip), "t", "c"),
			park:         open,
			keepKeys:     true,
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip)},
			holders:      []corev1.Service{svc(phNS, hold, ip, ip)},
			attaching:    ptr.To(withPort(svc("t", "web", "", "", iadv1alpha1.ServiceClaimAnnotation, "c"), 80)),
			want: want{key: "none", held: &heldState{metav1.ConditionTrue, conditions.ReasonHeldByPlaceholder,
				"MetalLB assigned 192.0.2.7 to placeholder Service iad-system/hold-ip-192-0-2-7"}},
		},
		{
			name:     "attached Service let go in one write (gap): no hold yet, until the association is cleared",
			addr:     associated(bound(address("ip-192-0-2-7", ip), "t", "c"), "t", "web"),
			holders:  []corev1.Service{svc("t", "web", "", ip)},
			attached: ptr.To(svc("t", "web", "", ip)),
			want: want{held: &heldState{metav1.ConditionFalse, conditions.ReasonReleasedForWorkload,
				"No placeholder holds the address: it is released for Service t/web"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.ungranted {
				for i := range tt.placeholders {
					marks.Edit(&tt.placeholders[i], func(m *marks.Marks) { m.Grant = tt.addr.Spec.ClassName })
				}
			}
			if !tt.keepKeys {
				for i := range tt.placeholders {
					if _, ok := tt.placeholders[i].Annotations[marks.KeySharing]; !ok {
						tt.placeholders[i].Annotations[marks.KeySharing] = sharingkey.Keys{}.Of(tt.addr)
					}
				}
			}
			p := planHold(view(tt.addr, tt.park, tt.placeholders, tt.holders, tt.attached, tt.attaching))
			switch tt.want.key {
			case "":
			case "none":
				assert.Empty(t, p.Key, "key")
			default:
				assert.Equal(t, tt.want.key, p.Key, "key")
			}
			assert.Equal(t, tt.want.create, p.Create, "create")
			assert.Equal(t, tt.want.repair, svcNames(p.Repair), "repair")
			assert.Equal(t, tt.want.delete, svcNames(p.Delete), "delete")
			assert.Equal(t, tt.want.park, svcNames(p.Park), "park")
			assert.Equal(t, tt.want.held, said(p.Held), "held")
			if tt.want.takenBy == "" {
				assert.Nil(t, p.TakenBy)
			} else if assert.NotNil(t, p.TakenBy) {
				assert.Equal(t, tt.want.takenBy, p.TakenBy.Namespace+"/"+p.TakenBy.Name)
			}
		})
	}
}

func TestRenderHold(t *testing.T) {
	for _, tt := range []struct {
		name, ip string
		family   corev1.IPFamily
	}{
		{"ip-203-0-113-7", "203.0.113.7", corev1.IPv4Protocol},
		{"ip6-2001-0db8-0000-0000-0000-0000-0000-0007", "2001:db8::7", corev1.IPv6Protocol},
		{"static.example.org", "203.0.113.8", corev1.IPv4Protocol},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := address(tt.name, tt.ip)
			s := renderHold(phNS, a, netip.MustParseAddr(tt.ip), "")
			assert.Equal(t, phNS, s.Namespace)
			assert.Equal(t, placeholder.HoldName(tt.name), s.Name)
			assert.Empty(t, validation.IsDNS1035Label(s.Name))
			assert.Equal(t, map[string]string{
				marks.LabelPlaceholder: names.PlaceholderHold,
				marks.LabelAddress:     tt.name,
				marks.LabelGrant:       a.Spec.ClassName,
			}, s.Labels)
			assert.Equal(t, map[string]string{
				marks.KeyPool:  "iad-gold",
				marks.KeyPin:   tt.ip,
				marks.KeyClass: "gold",
			}, s.Annotations, "a hold no workload shares carries no sharing key")
			key := sharingkey.Keys{}.Claim("shop", "web-ip", "claim-uid")
			b := renderHold(phNS, bound(address(tt.name, tt.ip), "shop", "web-ip"), netip.MustParseAddr(tt.ip), key)
			assert.Equal(t, key, b.Annotations[marks.KeySharing], "a hold made for a shared handoff carries the key")
			require.Len(t, s.OwnerReferences, 1)
			o := s.OwnerReferences[0]
			assert.Equal(t, "local.sdn.cozystack.io/v1alpha1", o.APIVersion)
			assert.Equal(t, "IPAddress", o.Kind)
			assert.Equal(t, tt.name, o.Name)
			assert.EqualValues(t, "addr-uid", o.UID)
			assert.False(t, *o.Controller)
			assert.False(t, *o.BlockOwnerDeletion)
			assert.Equal(t, corev1.ServiceTypeLoadBalancer, s.Spec.Type)
			assert.Empty(t, s.Spec.Selector)
			assert.False(t, *s.Spec.AllocateLoadBalancerNodePorts)
			assert.Equal(t, []corev1.IPFamily{tt.family}, s.Spec.IPFamilies)
			assert.Equal(t, corev1.IPFamilyPolicySingleStack, *s.Spec.IPFamilyPolicy)
			require.Len(t, s.Spec.Ports, 1)
			assert.Equal(t, int32(9), s.Spec.Ports[0].Port)
		})
	}
}

func TestHoldWait(t *testing.T) {
	hold := refs(svc(phNS, "hold", planIP, planIP))
	taker := svc("rogue", "grab", planIP, planIP)
	tests := []struct {
		name string
		plan holdPlan
		want string
	}{
		{"a hold to create", holdPlan{Create: true, Held: verdict(waitingForHold, nil)}, "MetalLB to assign the address to the new hold placeholder"},
		{"placeholders to park", holdPlan{Park: hold, Held: verdict(waitingForHold, nil)}, "MetalLB to move the placeholders to the parking pool"},
		{"parked, MetalLB has not moved them yet", holdPlan{Parking: true}, "MetalLB to move the placeholders to the parking pool"},
		{"placeholders to delete", holdPlan{Delete: hold, Held: verdict(heldByPlaceholder, nil)}, "the deleted placeholders to go"},
		{"taken elsewhere", holdPlan{Held: verdict(heldTakenElsewhere, &taker), TakenBy: &taker},
			"the Service holding the address without authority to let it go"},
		{"the attached Service leaves", holdPlan{}, "the attached Service to leave"},
		{"being imported", holdPlan{Held: verdict(heldImporting, nil)}, "the Service controller to import the address"},
		{"waiting for MetalLB", holdPlan{Held: verdict(waitingForHold, nil)}, "the hold to settle (the Held condition says on what)"},
		{"held", holdPlan{Held: verdict(heldByPlaceholder, nil)}, ""},
		{"released for the workload", holdPlan{Held: &heldVerdict{Code: heldReleased}}, ""},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, holdWait(tt.plan), tt.name)
	}
}

// TestPlanHoldImporting: an address being imported from a Service that
// holds it gets no hold placeholder; anything short of that is held as
// usual.
func TestPlanHoldImporting(t *testing.T) {
	const ip = "192.0.2.7"
	imported := func() *iadv1alpha1.IPAddress {
		a := bound(address("ip-192-0-2-7", ip), "shop", "web-imported-1")
		a.Labels = map[string]string{marks.LabelImported: "true"}
		return a
	}
	marked := svc("shop", "web", "", ip,
		iadv1alpha1.ServiceClaimAnnotation, "web-imported-1", marks.KeyImportedInto, "web-imported-1")
	importing := &heldState{metav1.ConditionUnknown, conditions.ReasonImporting,
		"Service shop/web holds 192.0.2.7 and is being imported into the address's claim; it keeps the address, so no placeholder is created"}

	tests := []struct {
		name    string
		addr    *iadv1alpha1.IPAddress
		holders []corev1.Service
		want    *heldState // nil: a hold placeholder is created
	}{
		{"the marked Service holds the address", imported(), []corev1.Service{marked}, importing},
		{"not labelled as imported", bound(address("ip-192-0-2-7", ip), "shop", "web-imported-1"), []corev1.Service{marked}, nil},
		{"already associated: the usual release", associated(imported(), "shop", "web"), []corev1.Service{marked}, nil},
		{"the Service does not hold it (deleted, or MetalLB let go)", imported(), nil, nil},
		{"Service in another namespace", imported(), []corev1.Service{svc("other", "web", "", ip,
			iadv1alpha1.ServiceClaimAnnotation, "web-imported-1", marks.KeyImportedInto, "web-imported-1")}, nil},
		{"claim annotation removed", imported(), []corev1.Service{svc("shop", "web", "", ip, marks.KeyImportedInto, "web-imported-1")}, nil},
		{"marker missing", imported(), []corev1.Service{svc("shop", "web", "", ip, iadv1alpha1.ServiceClaimAnnotation, "web-imported-1")}, nil},
		{"being deleted", imported(), []corev1.Service{deleting(marked)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := planHold(view(tt.addr, parkOpt{}, nil, tt.holders, nil, nil))
			if tt.want != nil {
				assert.False(t, p.Create, "no placeholder")
				assert.Equal(t, tt.want, said(p.Held))
				return
			}
			if tt.addr.Status.AssociatedTo != nil {
				assert.False(t, p.Create)
				assert.Equal(t, conditions.ReasonReleasedForWorkload, said(p.Held).Reason)
				return
			}
			assert.True(t, p.Create, "a hold placeholder is created")
		})
	}
}
