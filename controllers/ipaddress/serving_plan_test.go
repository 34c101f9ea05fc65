package ipaddress

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
)

func TestPlanServing(t *testing.T) {
	refusedMsg := `Attached to Service shop/web, which is pinned to 192.0.2.7 but holds none of it: MetalLB refused it the address ("not compatible with pool legacy"). ` +
		"The driver repairs what it wrote (its pin, a pool request it takes over); anything else on the Service that contradicts the pin must be removed"
	failed := &metav1.Condition{Type: conditions.AttachmentServed, Status: metav1.ConditionFalse, Reason: conditions.ReasonRefusedByMetalLB, Message: refusedMsg}
	served := &metav1.Condition{Type: conditions.AttachmentServed, Status: metav1.ConditionTrue}
	tests := []struct {
		name     string
		prev     *metav1.Condition
		svc      string
		refused  string
		unserved bool
		want     servingVerdict
	}{
		{"never failed: nothing written", nil, "shop/web", "", false, servingVerdict{}},
		{"not served yet, nothing refused: nothing written", nil, "shop/web", "", true, servingVerdict{}},
		{"refused: False with a Warning", nil, "shop/web", "not compatible with pool legacy", true,
			servingVerdict{set: true, status: metav1.ConditionFalse, reason: conditions.ReasonRefusedByMetalLB, message: refusedMsg, warn: true}},
		{"still refused: no second Warning", failed, "shop/web", "not compatible with pool legacy", true,
			servingVerdict{set: true, status: metav1.ConditionFalse, reason: conditions.ReasonRefusedByMetalLB, message: refusedMsg}},
		{"refused and still holding nothing: the refusal stands", failed, "shop/web", "", true, servingVerdict{}},
		{"holds it again: True", failed, "shop/web", "", false,
			servingVerdict{set: true, status: metav1.ConditionTrue, reason: conditions.ReasonServiceHoldsAddress, message: "The Service the address is attached to holds it"}},
		{"detached meanwhile: True", failed, "", "", false,
			servingVerdict{set: true, status: metav1.ConditionTrue, reason: conditions.ReasonServiceHoldsAddress, message: "The address is not attached to a Service MetalLB refuses"}},
		{"attached to another Service meanwhile, nothing refused yet: True", failed, "shop/api", "", true,
			servingVerdict{set: true, status: metav1.ConditionTrue, reason: conditions.ReasonServiceHoldsAddress, message: "The address is not attached to a Service MetalLB refuses"}},
		{"True stays", served, "shop/web", "", false, servingVerdict{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, planServing(tt.prev, "192.0.2.7", tt.svc, tt.refused, tt.unserved))
		})
	}
}

func TestRefusedFor(t *testing.T) {
	v := planServing(nil, "192.0.2.7", "shop/web", "no", true)
	c := &metav1.Condition{Type: conditions.AttachmentServed, Status: v.status, Reason: v.reason, Message: v.message}
	assert.True(t, refusedFor(c, "shop/web"))
	assert.False(t, refusedFor(c, "shop/we"), "another Service")
	assert.False(t, refusedFor(c, "shop/web2"), "another Service")
	assert.False(t, refusedFor(nil, "shop/web"))
	c.Status = metav1.ConditionTrue
	assert.False(t, refusedFor(c, "shop/web"))
}

func TestPinnedTo(t *testing.T) {
	svc := func(ann map[string]string, lbIP string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: ann}, Spec: corev1.ServiceSpec{LoadBalancerIP: lbIP}}
	}
	assert.True(t, pinnedTo(svc(map[string]string{marks.KeyPin: "192.0.2.7,2001:db8::7", marks.KeyPinnedBy: "c"}, ""), "192.0.2.7"))
	assert.True(t, pinnedTo(svc(nil, "192.0.2.7"), "192.0.2.7"), "an owner's pin counts")
	assert.False(t, pinnedTo(svc(map[string]string{marks.KeyPin: "192.0.2.8"}, ""), "192.0.2.7"))
	assert.False(t, pinnedTo(svc(nil, ""), "192.0.2.7"), "not pinned yet: the handoff is under way")
}

func TestRefusalByHolders(t *testing.T) {
	const ip = "192.0.2.7"
	hold := types.NamespacedName{Namespace: "iad-system", Name: "hold-ip-192-0-2-7"}
	rogue := types.NamespacedName{Namespace: "shop", Name: "rogue"}
	inUse := func(by ...types.NamespacedName) string {
		var s []string
		for _, n := range by {
			s = append(s, n.String())
		}
		return `Failed to allocate IP for "shop/web": can't change sharing key for "shop/web", address also in use by ` + strings.Join(s, ",")
	}
	for _, tc := range []struct {
		name         string
		msg          string
		own, holding []types.NamespacedName
		shared       bool
		want         refusalNow
	}{
		{"a reason of the Service's own", `Failed to allocate IP for "shop/web": ["192.0.2.7"] is not allowed in config`, []types.NamespacedName{hold}, nil, false, refusalStands},
		{"the hold, which still holds it", inUse(hold), []types.NamespacedName{hold}, []types.NamespacedName{hold}, false, refusalPassing},
		{"the hold, which has let go since", inUse(hold), []types.NamespacedName{hold}, nil, false, refusalOutdated},
		{"the hold, gone since", inUse(hold), nil, nil, false, refusalOutdated},
		{"another Service, which still holds it", inUse(rogue), []types.NamespacedName{hold}, []types.NamespacedName{rogue}, false, refusalStands},
		{"another Service, which has let go since", inUse(rogue), []types.NamespacedName{hold}, nil, false, refusalOutdated},
		{"the hold and another Service, both holding", inUse(hold, rogue), []types.NamespacedName{hold}, []types.NamespacedName{hold, rogue}, false, refusalStands},
		{"the hold and another Service, the hold still holding", inUse(hold, rogue), []types.NamespacedName{hold}, []types.NamespacedName{hold}, false, refusalPassing},
		// A shared attachment keeps the hold on the address: still holding,
		// it is no passing moment.
		{"the hold, still holding beside a sharing Service", inUse(hold), []types.NamespacedName{hold}, []types.NamespacedName{hold}, true, refusalStands},
		{"the hold, which has let go, in a shared attachment", inUse(hold), []types.NamespacedName{hold}, nil, true, refusalOutdated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, refusalByHolders(tc.msg, ip, tc.own, tc.holding, tc.shared))
		})
	}
}
