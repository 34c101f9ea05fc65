package hold

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/sharingkey"
)

func TestUnheld(t *testing.T) {
	a := bound(address("ip-192-0-2-7", planIP), "t", "c")
	ph := svc(phNS, "hold", planIP, "")
	own := svc("t", "web", planIP, planIP, iadv1alpha1.ServiceClaimAnnotation, "c", marks.KeyPinnedBy, "c")
	keyed := svc("t", "web", planIP, planIP, marks.KeyPinnedBy, "c", marks.KeySharing, sharingkey.Keys{}.Claim("t", "c", "claim-uid"))
	letGo := svc("t", "old", planIP, "")
	granted := svc("x", "granted", planIP, planIP)
	granted.Labels = map[string]string{marks.LabelGrant: a.Spec.ClassName}
	tests := []struct {
		name      string
		grantOnly bool
		holders   []corev1.Service
		want      *heldState
		takenBy   string
	}{
		{"a Service let go, in a pool for granted Services only: MetalLB is taking the address from it", true, []corev1.Service{letGo}, waiting(
			"Waiting for MetalLB to take 192.0.2.7 from Service t/old, which does not carry " + marks.GrantText(a.Spec.ClassName) +
				" (the class's pool admits only Services that do), before the placeholder holds it again"), ""},
		{"the same Service in a pool that admits any Service keeps it", false, []corev1.Service{letGo}, &heldState{metav1.ConditionFalse, conditions.ReasonTakenElsewhere,
			"Service t/old holds 192.0.2.7 in MetalLB without this address's authority, so the placeholder cannot; " +
				"the driver keeps the placeholder pinned to 192.0.2.7 and never substitutes another address"}, "t/old"},
		{"an authorized Service is waited for before one being taken from", true, []corev1.Service{letGo, own}, waiting(
			"Waiting for Service t/web, which this address's binding authorizes, to release 192.0.2.7 to the placeholder"), ""},
		{"a granted Service without authority has taken it", true, []corev1.Service{letGo, granted}, &heldState{metav1.ConditionFalse, conditions.ReasonTakenElsewhere,
			"Service x/granted holds 192.0.2.7 in MetalLB without this address's authority, so the placeholder cannot; " +
				"the driver keeps the placeholder pinned to 192.0.2.7 and never substitutes another address"}, "x/granted"},
		{"nobody holds it", false, nil, waiting("Waiting for MetalLB to assign 192.0.2.7 to placeholder Service iad-system/hold"), ""},
		{"our own placeholder is not someone else", false, []corev1.Service{ph}, waiting("Waiting for MetalLB to assign 192.0.2.7 to placeholder Service iad-system/hold"), ""},
		{"another claim's placeholder", false, []corev1.Service{svc(phNS, "alloc-ipv4-other", "", planIP)}, waiting(
			"Placeholder Service iad-system/alloc-ipv4-other of another claim got 192.0.2.7 while it was unheld; waiting for the claim controller to give it back"), ""},
		{"an authorized Service releasing it", false, []corev1.Service{own}, waiting(
			"Waiting for Service t/web, which this address's binding authorizes, to release 192.0.2.7 to the placeholder"), ""},
		{"an authorized Service with the key: the shared handoff", false, []corev1.Service{keyed}, waiting(
			"Waiting for MetalLB to let placeholder Service iad-system/hold share 192.0.2.7 with Service t/web, which this address's binding authorizes (shared handoff)"), ""},
		{"an intruder wins over everyone", false, []corev1.Service{own, svc("x", "rogue", planIP, planIP)}, &heldState{metav1.ConditionFalse, conditions.ReasonTakenElsewhere,
			"Service x/rogue holds 192.0.2.7 in MetalLB without this address's authority, so the placeholder cannot; " +
				"the driver keeps the placeholder pinned to 192.0.2.7 and never substitutes another address"}, "x/rogue"},
	}
	for _, tt := range tests {
		v := view(a, parkOpt{GrantOnly: tt.grantOnly}, []corev1.Service{ph}, tt.holders, nil, nil)
		held, taken := look(v).unheld()
		assert.Equal(t, tt.want, said(held), tt.name)
		assert.Equal(t, tt.takenBy, name(taken), tt.name)
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
		got := releasedFor(tt.addr, sharingkey.Keys{}.Of(tt.addr), tt.attached, tt.deleted)
		assert.Equal(t, tt.want, got != nil, tt.name)
	}
}

// annotated is s with annotations.
func annotated(s corev1.Service, annotations map[string]string) corev1.Service {
	s.Annotations = annotations
	return s
}

func TestGrantState(t *testing.T) {
	a := &iadv1alpha1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: "ip-192-0-2-1"},
		Spec: iadv1alpha1.IPAddressSpec{Address: "192.0.2.1", ClassName: "public",
			ClaimRef: &iadv1alpha1.ClaimReference{Namespace: "shop", Name: "web-ip"}},
		Status: iadv1alpha1.IPAddressStatus{AssociatedTo: &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "shop", Name: "web"}},
	}
	svc := func(ns, name string, granted string) corev1.Service {
		s := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if granted != "" {
			s.Labels = map[string]string{marks.LabelGrant: granted}
		}
		return s
	}
	tests := []struct {
		name    string
		holders []corev1.Service
		want    metav1.ConditionStatus
		missing string
	}{
		{"nobody holds it", nil, metav1.ConditionTrue, ""},
		{"granted placeholder and workload", []corev1.Service{svc("iad", "hold", "public"), svc("shop", "web", "public")}, metav1.ConditionTrue, ""},
		{"ungranted placeholder", []corev1.Service{svc("iad", "hold", "")}, metav1.ConditionFalse, "iad/hold"},
		{"workload granted another class", []corev1.Service{svc("shop", "web", "private")}, metav1.ConditionFalse, "shop/web"},
		{"a holder without authority is not waited for", []corev1.Service{svc("rogue", "grab", "")}, metav1.ConditionTrue, ""},
		{"a workload released by withdrawing its grant is not waited for",
			[]corev1.Service{annotated(svc("shop", "old", ""), map[string]string{marks.KeyPinnedBy: "web-ip"})}, metav1.ConditionTrue, ""},
		{"nor one released with the release pin",
			[]corev1.Service{annotated(svc("shop", "old", ""), map[string]string{marks.KeyPinnedBy: "web-ip", marks.KeyPin: "::"})}, metav1.ConditionTrue, ""},
		{"nor the workload let go in one write (no marker, no grant, still associated)",
			[]corev1.Service{svc("shop", "web", "")}, metav1.ConditionTrue, ""},
		{"a pinned workload without the grant is waited for",
			[]corev1.Service{annotated(svc("shop", "old", ""), map[string]string{marks.KeyPinnedBy: "web-ip", marks.KeyPin: "192.0.2.1"})}, metav1.ConditionFalse, "shop/old"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := grantedWords(a.Spec.ClassName, ungranted(a, tt.holders, "iad"))
			assert.Equal(t, tt.want, got.Status)
			if tt.missing != "" {
				assert.Contains(t, got.Message, tt.missing)
				assert.Equal(t, conditions.ReasonHolderNotGranted, got.Reason)
			}
		})
	}
}

// TestHeldWords: every verdict has words of its own, and the condition's
// status and reason follow its code.
func TestHeldWords(t *testing.T) {
	w := shared().Status.AssociatedTo
	for c := heldByPlaceholder; c <= waitingToShareAttached; c++ {
		h := heldWords(&heldVerdict{Code: c, By: types.NamespacedName{Namespace: phNS, Name: "hold"}, For: w}, planIP, "gold", "parking")
		assert.NotContains(t, h.Message, "hold verdict", "code %d", c)
		assert.Equal(t, c.waits(), h.Status == metav1.ConditionUnknown, "code %d", c)
		assert.Equal(t, c.released(), h.Reason == conditions.ReasonReleasedForWorkload, "code %d", c)
	}
}
