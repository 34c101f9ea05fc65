package ipaddress

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
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

func heldBy(ph string) *heldState {
	return &heldState{metav1.ConditionTrue, conditions.ReasonHeldByPlaceholder, "MetalLB assigned 192.0.2.7 to placeholder Service " + ph}
}

func sharedWith(ph string) *heldState {
	return &heldState{metav1.ConditionTrue, conditions.ReasonSharedWithWorkload,
		"MetalLB assigned 192.0.2.7 to placeholder Service " + ph + ", which shares it with Service t/web, " +
			"the address is attached to (shared attachment): detaching or deleting that Service leaves the address held"}
}

var releasedForWeb = &heldState{metav1.ConditionFalse, conditions.ReasonReleasedForWorkload,
	"No placeholder holds the address: it is released for Service t/web"}

func TestLiveOnly(t *testing.T) {
	tests := []struct {
		name string
		in   []corev1.Service
		want []string
	}{
		{"none", nil, nil},
		{"the deleting one is left out", []corev1.Service{svc(phNS, "a", "", ""), deleting(svc(phNS, "b", "", ""))}, []string{phNS + "/a"}},
		{"all deleting", []corev1.Service{deleting(svc(phNS, "b", "", ""))}, nil},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, svcNames(liveOnly(tt.in)), tt.name)
	}
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
		assert.Equal(t, holdPlan{Held: tt.want}, planRecording(tt.addr, planIP, &ph), tt.name)
	}
}

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
			waiting("Waiting for MetalLB to move placeholder Service iad-system/hold from 192.0.2.7 to the parking pool parking"), nil, []string{phNS + "/hold"}, false},
		{"parked, one still terminating on the address: not released", open, gap, []corev1.Service{parked("240.0.0.1"), deleting(hold)},
			waiting("Waiting for MetalLB to move placeholder Service iad-system/hold from 192.0.2.7 to the parking pool parking"), nil, nil, false},
		{"parked and moved: released", open, gap, []corev1.Service{parked("240.0.0.1")}, releasedForWeb, nil, nil, false},
		{"parked, MetalLB gave it nothing (parking full): released all the same", open, gap, []corev1.Service{parked("")}, releasedForWeb, nil, nil, false},
	}
	for _, tt := range tests {
		p := planAttached(shared(), planIP, marks.Keys{}.Of(shared()), phNS, tt.park, w, tt.attached, tt.placeholders)
		assert.Equal(t, tt.held, p.Held, tt.name)
		assert.Equal(t, tt.delete, svcNames(p.Delete), tt.name)
		assert.Equal(t, tt.parked, svcNames(p.Park), tt.name)
		assert.Equal(t, tt.create, p.Create, tt.name)
	}
}

func TestPlanMissing(t *testing.T) {
	imported := bound(address("ip-192-0-2-7", planIP), "t", "c")
	imported.Labels = map[string]string{names.LabelImported: "true"}
	importer := svc("t", "web", "", planIP, iadv1alpha1.ServiceClaimAnnotation, "c", names.AnnotationImportedInto, "c")
	asker := svc("t", "web", "", "", iadv1alpha1.ServiceClaimAnnotation, "c")
	creating := waiting("Waiting for MetalLB to assign 192.0.2.7 to placeholder Service iad-system/hold-ip-192-0-2-7")
	tests := []struct {
		name      string
		addr      *iadv1alpha1.IPAddress
		holders   []corev1.Service
		attaching *corev1.Service
		want      holdPlan
	}{
		{"a hold without a key", bound(address("ip-192-0-2-7", planIP), "t", "c"), nil, nil, holdPlan{Create: true, Held: creating}},
		{"a hold with the key for a Service about to share", bound(address("ip-192-0-2-7", planIP), "t", "c"), nil, &asker,
			holdPlan{Create: true, Key: marks.Keys{}.Claim("t", "c", "claim-uid"), Held: creating}},
		{"imported from its holder: no hold", imported, []corev1.Service{importer}, nil, holdPlan{Held: &heldState{metav1.ConditionUnknown, conditions.ReasonImporting,
			"Service t/web holds 192.0.2.7 and is being imported into the address's claim; it keeps the address, so no placeholder is created"}}},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, planMissing(tt.addr, planIP, marks.Keys{}.Of(tt.addr), phNS, parkOpt{}, tt.holders, tt.attaching), tt.name)
	}
}

func TestSurplus(t *testing.T) {
	holder, idle, alsoHolds := svc(phNS, "a", planIP, planIP), svc(phNS, "b", planIP, ""), svc(phNS, "c", planIP, planIP)
	tests := []struct {
		name string
		live []*corev1.Service
		want []string
	}{
		{"only the holder", refs(holder), nil},
		{"an idle one goes", refs(holder, idle), []string{phNS + "/b"}},
		{"another holding one stays", refs(holder, alsoHolds, idle), []string{phNS + "/b"}},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, svcNames(surplus(planIP, tt.live, tt.live[0])), tt.name)
	}
}

func TestUnheld(t *testing.T) {
	a := bound(address("ip-192-0-2-7", planIP), "t", "c")
	ph := svc(phNS, "hold", planIP, "")
	own := svc("t", "web", planIP, planIP, iadv1alpha1.ServiceClaimAnnotation, "c", marks.KeyPinnedBy, "c")
	keyed := svc("t", "web", planIP, planIP, marks.KeyPinnedBy, "c", marks.KeySharing, marks.Keys{}.Claim("t", "c", "claim-uid"))
	tests := []struct {
		name    string
		holders []corev1.Service
		want    *heldState
		takenBy string
	}{
		{"nobody holds it", nil, waiting("Waiting for MetalLB to assign 192.0.2.7 to placeholder Service iad-system/hold"), ""},
		{"our own placeholder is not someone else", []corev1.Service{ph}, waiting("Waiting for MetalLB to assign 192.0.2.7 to placeholder Service iad-system/hold"), ""},
		{"another claim's placeholder", []corev1.Service{svc(phNS, "alloc-ipv4-other", "", planIP)}, waiting(
			"Placeholder Service iad-system/alloc-ipv4-other of another claim got 192.0.2.7 while it was unheld; waiting for the claim controller to give it back"), ""},
		{"an authorized Service releasing it", []corev1.Service{own}, waiting(
			"Waiting for Service t/web, which this address's binding authorizes, to release 192.0.2.7 to the placeholder"), ""},
		{"an authorized Service with the key: the shared handoff", []corev1.Service{keyed}, waiting(
			"Waiting for MetalLB to let placeholder Service iad-system/hold share 192.0.2.7 with Service t/web, which this address's binding authorizes (shared handoff)"), ""},
		{"an intruder wins over everyone", []corev1.Service{own, svc("x", "rogue", planIP, planIP)}, &heldState{metav1.ConditionFalse, conditions.ReasonTakenElsewhere,
			"Service x/rogue holds 192.0.2.7 in MetalLB without this address's authority, so the placeholder cannot; " +
				"the driver keeps the placeholder pinned to 192.0.2.7 and never substitutes another address"}, "x/rogue"},
	}
	for _, tt := range tests {
		held, taken := unheld(a, planIP, marks.Keys{}.Of(a), phNS, []corev1.Service{ph}, refs(ph), tt.holders)
		assert.Equal(t, tt.want, held, tt.name)
		assert.Equal(t, tt.takenBy, name(taken), tt.name)
	}
}

// name is a Service's key, "" for none.
func name(s *corev1.Service) string {
	if s == nil {
		return ""
	}
	return s.Namespace + "/" + s.Name
}

func TestPlanShared(t *testing.T) {
	w := shared().Status.AssociatedTo
	key := marks.Keys{}.Claim("t", "c", "claim-uid")
	keyed := func(s corev1.Service) corev1.Service {
		s.Annotations[marks.KeySharing] = key
		marks.Edit(&s, func(m *marks.Marks) { m.Grant = "gold" })
		return s
	}
	hold, idle := keyed(svc(phNS, "hold", planIP, planIP)), keyed(svc(phNS, "idle", planIP, ""))
	tests := []struct {
		name     string
		attached corev1.Service
		live     []*corev1.Service
		total    int
		want     holdPlan
	}{
		{"no placeholder, the Service not holding yet: released", sharingWorkload(planIP, ""), nil, 0, holdPlan{Key: key, Held: releasedForWeb}},
		{"no placeholder, the Service holding: create one", sharingWorkload(planIP, planIP), nil, 0, holdPlan{Key: key, Create: true, Held: waiting(
			"Waiting for MetalLB to let placeholder Service iad-system/hold-ip-192-0-2-7 share 192.0.2.7 with Service t/web, the address is attached to (shared attachment)")}},
		{"only a deleting one", sharingWorkload(planIP, planIP), nil, 1, holdPlan{Key: key, Held: waiting(
			"The placeholder of 192.0.2.7 is being deleted; a new one is created once it is gone")}},
		{"one not holding yet", sharingWorkload(planIP, planIP), refs(idle), 1, holdPlan{Key: key, Held: waiting(
			"Waiting for MetalLB to let placeholder Service iad-system/idle share 192.0.2.7 with Service t/web, the address is attached to (shared attachment)")}},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, planShared(shared(), planIP, marks.Keys{}.Of(shared()), phNS, w, &tt.attached, tt.live, tt.total), tt.name)
	}
	live := refs(idle, hold)
	p := planShared(shared(), planIP, marks.Keys{}.Of(shared()), phNS, w, ptr.To(sharingWorkload(planIP, planIP)), live, 2)
	assert.Equal(t, sharedWith(phNS+"/hold"), p.Held, "the holding one holds, the idle one goes")
	assert.Equal(t, []string{phNS + "/idle"}, svcNames(p.Delete))
	assert.Empty(t, p.Repair)
}

func TestPlanLeaving(t *testing.T) {
	w := shared().Status.AssociatedTo
	tests := []struct {
		name  string
		live  []*corev1.Service
		total int
		want  holdPlan
	}{
		{"a placeholder holds: shared", refs(svc(phNS, "idle", planIP, ""), svc(phNS, "hold", planIP, planIP)), 2, holdPlan{Held: sharedWith(phNS + "/hold")}},
		{"none left: released", nil, 0, holdPlan{Held: releasedForWeb}},
		{"one not holding: left as it is", refs(svc(phNS, "idle", planIP, "")), 1, holdPlan{}},
		{"only a deleting one: left as it is", nil, 1, holdPlan{}},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, planLeaving(shared(), planIP, w, tt.live, tt.total), tt.name)
	}
}

func TestRepairsAndHolder(t *testing.T) {
	a := address("ip-192-0-2-7", planIP)
	granted := func(s corev1.Service) corev1.Service {
		marks.Edit(&s, func(m *marks.Marks) { m.Grant = "gold" })
		return s
	}
	tests := []struct {
		name   string
		live   []*corev1.Service
		key    string
		repair []string
		holder string
	}{
		{"right and holding", refs(granted(svc(phNS, "a", planIP, planIP))), "", nil, phNS + "/a"},
		{"wrong pin", refs(granted(svc(phNS, "a", "192.0.2.8", ""))), "", []string{phNS + "/a"}, ""},
		{"no grant label", refs(svc(phNS, "a", planIP, planIP)), "", []string{phNS + "/a"}, phNS + "/a"},
		{"the key missing", refs(granted(svc(phNS, "a", planIP, ""))), "k", []string{phNS + "/a"}, ""},
		{"the first holder counts", refs(granted(svc(phNS, "a", planIP, "")), granted(svc(phNS, "b", planIP, planIP)), granted(svc(phNS, "c", planIP, planIP))), "", nil, phNS + "/b"},
	}
	for _, tt := range tests {
		repair, holder := repairsAndHolder(a, planIP, tt.key, tt.live)
		assert.Equal(t, tt.repair, svcNames(repair), tt.name)
		assert.Equal(t, tt.holder, name(holder), tt.name)
	}
}

func TestHoldKey(t *testing.T) {
	a := bound(address("ip-192-0-2-7", planIP), "t", "c")
	key := marks.Keys{}.Claim("t", "c", "claim-uid")
	tests := []struct {
		name  string
		live  []*corev1.Service
		share bool
		want  string
	}{
		{"nobody shares: none", refs(svc(phNS, "a", planIP, "")), false, ""},
		{"a workload shares: the key", nil, true, key},
		{"a placeholder carries it already: kept", refs(svc(phNS, "a", planIP, "", marks.KeySharing, key)), false, key},
		{"another binding's key: taken away", refs(svc(phNS, "a", planIP, "", marks.KeySharing, "old")), false, ""},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, holdKey(marks.Keys{}.Of(a), tt.live, tt.share), tt.name)
	}
}

func TestRechecks(t *testing.T) {
	unattached := bound(address("ip-192-0-2-7", planIP), "t", "c")
	releasedAlready := shared()
	releasedAlready.Status.Conditions = []metav1.Condition{{Type: conditions.Held, Status: metav1.ConditionFalse, Reason: conditions.ReasonReleasedForWorkload}}
	drop := holdPlan{Delete: refs(svc(phNS, "hold", planIP, planIP))}
	gap := svc("t", "web", planIP, "", marks.KeyPinnedBy, "c")
	tests := []struct {
		name         string
		addr         *iadv1alpha1.IPAddress
		plan         holdPlan
		attached     *corev1.Service
		attachedToo  bool
		placeholders bool
	}{
		{"the gap handoff drops the hold: read the address and the Service again", shared(), drop, &gap, true, false},
		{"a shared attachment's surplus: no re-read", shared(), drop, ptr.To(sharingWorkload(planIP, planIP)), false, false},
		{"an unattached address's surplus: no re-read", unattached, drop, nil, false, false},
		{"nothing to drop", shared(), holdPlan{}, &gap, false, false},
		{"a hold to create: look for a placeholder the cache missed", unattached, holdPlan{Create: true, Held: waiting("x")}, nil, false, true},
		{"reporting the hold released", shared(), holdPlan{Held: releasedForWeb}, &gap, false, true},
		{"released already", releasedAlready, holdPlan{Held: releasedForWeb}, &gap, false, false},
		{"held", unattached, holdPlan{Held: heldBy("x")}, nil, false, false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.attachedToo, recheckAttached(tt.addr, marks.Keys{}.Of(tt.addr), tt.plan, tt.attached), tt.name)
		assert.Equal(t, tt.placeholders, recheckPlaceholders(tt.addr, tt.plan), tt.name)
	}
}

func TestAlreadyReleased(t *testing.T) {
	cond := func(status metav1.ConditionStatus, reason string) *iadv1alpha1.IPAddress {
		a := shared()
		a.Status.Conditions = []metav1.Condition{{Type: conditions.Held, Status: status, Reason: reason}}
		return a
	}
	tests := []struct {
		name string
		addr *iadv1alpha1.IPAddress
		want bool
	}{
		{"no condition", shared(), false},
		{"released", cond(metav1.ConditionFalse, conditions.ReasonReleasedForWorkload), true},
		{"taken elsewhere", cond(metav1.ConditionFalse, conditions.ReasonTakenElsewhere), false},
		{"held", cond(metav1.ConditionTrue, conditions.ReasonHeldByPlaceholder), false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, alreadyReleased(tt.addr), tt.name)
	}
}

func TestReleasedFor(t *testing.T) {
	gap := svc("t", "web", planIP, "", marks.KeyPinnedBy, "c")
	tests := []struct {
		name     string
		addr     *iadv1alpha1.IPAddress
		attached *corev1.Service
		deleted  int
		want     bool
	}{
		{"the gap handoff deleted the hold", shared(), &gap, 1, true},
		{"nothing deleted", shared(), &gap, 0, false},
		{"a shared attachment's surplus", shared(), ptr.To(sharingWorkload(planIP, planIP)), 1, false},
		{"unattached", bound(address("ip-192-0-2-7", planIP), "t", "c"), nil, 1, false},
	}
	for _, tt := range tests {
		got := releasedFor(tt.addr, marks.Keys{}.Of(tt.addr), tt.attached, tt.deleted)
		assert.Equal(t, tt.want, got != nil, tt.name)
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
		assert.Same(t, tt.want, rightfulHolder(tt.addr, marks.Keys{}.Of(tt.addr), tt.attached, tt.attaching), tt.name)
	}
}
