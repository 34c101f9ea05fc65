package hold

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/sharingkey"
)

func TestPlanAttached(t *testing.T) {
	w := shared().Status.AssociatedTo
	hold := svc(phNS, "hold", planIP, planIP)
	going := deleting(svc(phNS, "going", planIP, ""))
	parked := func(ingress string) corev1.Service {
		return svc(phNS, "hold", "", ingress, marks.KeyPool, "parking")
	}
	open := parkOpt{Pool: "parking", Open: true}
	gap := ptr.To(svc("t", "web", planIP, "", marks.KeyPinnedBy, "c"))
	tests := []struct {
		name           string
		park           parkOpt
		attached       *corev1.Service
		placeholders   []corev1.Service
		held           *heldState
		delete, parked []string
		create         bool
	}{
		{"the Service is being deleted: the holding placeholder stays", parkOpt{}, ptr.To(deleting(sharingWorkload(planIP, planIP))), []corev1.Service{hold}, sharedWith(phNS + "/hold"), nil, nil, false},
		{"the Service was let go: nothing moves", open, ptr.To(svc("t", "web", "", planIP)), []corev1.Service{hold}, sharedWith(phNS + "/hold"), nil, nil, false},
		{"shared attachment without a placeholder: a hold is created", parkOpt{}, ptr.To(sharingWorkload(planIP, planIP)), nil,
			waiting("Waiting for MetalLB to let placeholder Service iad-system/hold-ip-192-0-2-7 share 192.0.2.7 with Service t/web, the address is attached to (shared attachment)"), nil, nil, true},
		{"gap handoff, no placeholder left: released", parkOpt{}, gap, nil, releasedForWeb, nil, nil, false},
		{"gap handoff: the live placeholders go", parkOpt{}, gap, []corev1.Service{hold, going}, nil, []string{phNS + "/hold"}, nil, false},
		{"not in the cache: the gap handoff", parkOpt{}, nil, []corev1.Service{hold}, nil, []string{phNS + "/hold"}, nil, false},
		{"gap handoff with parking: the live placeholders park", open, gap, []corev1.Service{hold, going},
			nil, nil, []string{phNS + "/hold"}, false},
		{"parked, one still terminating on the address: not released", open, gap, []corev1.Service{parked("240.0.0.1"), deleting(hold)},
			nil, nil, nil, false},
		{"parked and moved: released", open, gap, []corev1.Service{parked("240.0.0.1")}, releasedParked, nil, nil, false},
		{"parked, MetalLB gave it nothing (parking full): released all the same", open, gap, []corev1.Service{parked("")}, releasedParked, nil, nil, false},
	}
	for _, tt := range tests {
		p := look(view(shared(), tt.park, tt.placeholders, nil, tt.attached, nil)).planAttached(w)
		assert.Equal(t, tt.held, said(p.Held), tt.name)
		assert.Equal(t, tt.delete, svcNames(p.Delete), tt.name)
		assert.Equal(t, tt.parked, svcNames(p.Park), tt.name)
		assert.Equal(t, tt.create, p.Create, tt.name)
	}
}

func TestPlanShared(t *testing.T) {
	w := shared().Status.AssociatedTo
	key := sharingkey.Keys{}.Claim("t", "c", "claim-uid")
	keyed := func(s corev1.Service) corev1.Service {
		s.Annotations[marks.KeySharing] = key
		marks.Edit(&s, func(m *marks.Marks) { m.Grant = "gold" })
		return s
	}
	hold, idle := keyed(svc(phNS, "hold", planIP, planIP)), keyed(svc(phNS, "idle", planIP, ""))
	tests := []struct {
		name         string
		attached     corev1.Service
		placeholders []corev1.Service
		want         saidPlan
	}{
		{"no placeholder, the Service not holding yet: released", sharingWorkload(planIP, ""), nil, saidPlan{Key: key, Held: releasedForWeb}},
		{"no placeholder, the Service holding: create one", sharingWorkload(planIP, planIP), nil, saidPlan{Key: key, Create: true, Held: waiting(
			"Waiting for MetalLB to let placeholder Service iad-system/hold-ip-192-0-2-7 share 192.0.2.7 with Service t/web, the address is attached to (shared attachment)")}},
		{"only a deleting one", sharingWorkload(planIP, planIP), []corev1.Service{deleting(idle)}, saidPlan{Key: key, Held: waiting(
			"The placeholder of 192.0.2.7 is being deleted; a new one is created once it is gone")}},
		{"one not holding yet", sharingWorkload(planIP, planIP), []corev1.Service{idle}, saidPlan{Key: key, Held: waiting(
			"Waiting for MetalLB to let placeholder Service iad-system/idle share 192.0.2.7 with Service t/web, the address is attached to (shared attachment)")}},
	}
	for _, tt := range tests {
		got := look(view(shared(), parkOpt{}, tt.placeholders, nil, &tt.attached, nil)).planShared(w)
		assert.Equal(t, tt.want, sayPlan(got), tt.name)
	}
	p := look(view(shared(), parkOpt{}, []corev1.Service{idle, hold}, nil, ptr.To(sharingWorkload(planIP, planIP)), nil)).planShared(w)
	assert.Equal(t, sharedWith(phNS+"/hold"), said(p.Held), "the holding one holds, the idle one goes")
	assert.Equal(t, []string{phNS + "/idle"}, svcNames(p.Delete))
	assert.Empty(t, p.Repair)
}

func TestPlanLeaving(t *testing.T) {
	w := shared().Status.AssociatedTo
	idle, hold := svc(phNS, "idle", planIP, ""), svc(phNS, "hold", planIP, planIP)
	tests := []struct {
		name         string
		placeholders []corev1.Service
		want         saidPlan
	}{
		{"a placeholder holds: shared", []corev1.Service{idle, hold}, saidPlan{Held: sharedWith(phNS + "/hold")}},
		{"none left: released", nil, saidPlan{Held: releasedForWeb}},
		{"one not holding: left as it is", []corev1.Service{idle}, saidPlan{}},
		{"only a deleting one: left as it is", []corev1.Service{deleting(hold)}, saidPlan{}},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, sayPlan(look(view(shared(), parkOpt{}, tt.placeholders, nil, nil, nil)).planLeaving(w)), tt.name)
	}
}

func TestHoldKey(t *testing.T) {
	key := sharingkey.Keys{}.Claim("t", "c", "claim-uid")
	before := sharingkey.NewKeys([]byte("the-secret-before-the-rotation")).Claim("t", "c", "claim-uid")
	tests := []struct {
		name  string
		live  []corev1.Service
		share bool
		want  string
	}{
		{"nobody shares: none", []corev1.Service{svc(phNS, "a", planIP, "")}, false, ""},
		{"a workload shares: the key", nil, true, key},
		{"a placeholder carries it already: kept", []corev1.Service{svc(phNS, "a", planIP, "", marks.KeySharing, key)}, false, key},
		{"another binding's key: taken away", []corev1.Service{svc(phNS, "a", planIP, "", marks.KeySharing, "old")}, false, ""},
		{"the binding's key before a rotation: replaced in one write", []corev1.Service{svc(phNS, "a", planIP, "", marks.KeySharing, before)}, false, key},
	}
	for _, tt := range tests {
		v := view(bound(address("ip-192-0-2-7", planIP), "t", "c"), parkOpt{}, tt.live, nil, nil, nil)
		v.before = before
		assert.Equal(t, tt.want, look(v).holdKey(tt.share), tt.name)
	}
}

func TestSharesSoon(t *testing.T) {
	a := bound(address("ip-192-0-2-7", "192.0.2.7"), "t", "c")
	asker := func(edit func(*corev1.Service)) *corev1.Service {
		s := svc("t", "web", "", "", iadv1alpha1.ServiceClaimAnnotation, " c ")
		edit(&s)
		return &s
	}
	for _, tt := range []struct {
		name string
		svc  *corev1.Service
		want bool
	}{
		{"a Service asking for the claim that can share", asker(func(*corev1.Service) {}), true},
		{"no Service", nil, false},
		{"being deleted", asker(func(s *corev1.Service) { s.DeletionTimestamp = ptr.To(metav1.Now()) }), false},
		{"asking for another claim", asker(func(s *corev1.Service) { s.Annotations[iadv1alpha1.ServiceClaimAnnotation] = "other" }), false},
		{"in another namespace", asker(func(s *corev1.Service) { s.Namespace = "u" }), false},
		{"with a sharing key of its own", asker(func(s *corev1.Service) { s.Annotations[marks.KeySharing] = "mine" }), false},
		{"with a pin of its own", asker(func(s *corev1.Service) { s.Annotations[marks.KeyPin] = "192.0.2.7" }), false},
		{"on the placeholder's port", asker(func(s *corev1.Service) { *s = withPort(*s, 9) }), false},
		{"with externalTrafficPolicy Local", asker(func(s *corev1.Service) {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}), false},
	} {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.want, sharesSoon(a, tt.svc)) })
	}
	assert.False(t, sharesSoon(address("ip-192-0-2-7", "192.0.2.7"), asker(func(*corev1.Service) {})), "an address bound to no claim")
}

// TestPairKey: after a rotation of the secret, an address shared with the
// attached Service, or handed back by it, stays under the key the pair
// shares; otherwise the current key.
func TestPairKey(t *testing.T) {
	a := bound(address("ip-192-0-2-7", planIP), "t", "c")
	old := sharingkey.Keys{}.Claim("t", "c", "claim-uid")
	current := sharingkey.NewKeys([]byte("rotated-secret-of-32-bytes-long!")).Claim("t", "c", "claim-uid")
	pair := sharingWorkload(planIP, planIP)
	hold := svc(phNS, "hold", planIP, planIP, marks.KeySharing, old)
	other := svc("x", "other", planIP, planIP, marks.KeyPinnedBy, "c", marks.KeySharing, "metallb-iad-foreign", marks.KeySharedBy, "c")
	attached := a.DeepCopy()
	attached.Status.AssociatedTo = &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "t", Name: "web"}
	for _, tt := range []struct {
		name     string
		addr     *iadv1alpha1.IPAddress
		attached *corev1.Service
		holders  []corev1.Service
		want     string
	}{
		{"unattached, nobody shares it: the current key", a, nil, []corev1.Service{hold}, current},
		{"attached, shared under the old key: kept", attached, &pair, []corev1.Service{hold, pair}, old},
		{"handed back under the old key: kept", a, nil, []corev1.Service{hold, pair}, old},
		{"a holder its binding does not authorize hands nothing back", a, nil, []corev1.Service{hold, other}, current},
	} {
		assert.Equal(t, tt.want, pairKey(tt.addr, current, planIP, tt.attached, tt.holders, []corev1.Service{hold}), tt.name)
	}
}
