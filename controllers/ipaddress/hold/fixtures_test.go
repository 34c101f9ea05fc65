package hold

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/sharingkey"
	"github.com/cozystack/metallb-iad/test/fixture"
)

// The plan tests' objects (fixture).
const phNS = fixture.PlanNamespace

var (
	address    = fixture.PlanAddress
	bound      = fixture.Bound
	associated = fixture.Associated
	svc        = fixture.PlanService
	svcNames   = fixture.ServiceNames
)

// sharingWorkload is Service t/web attached to claim t/c in a shared
// attachment: the driver's pin and the claim's sharing key.
func sharingWorkload(pin, ingress string) corev1.Service {
	return svc("t", "web", pin, ingress, marks.KeyPinnedBy, "c",
		marks.KeySharing, sharingkey.Keys{}.Claim("t", "c", "claim-uid"), marks.KeySharedBy, "c")
}

// withPort gives a Service one TCP port.
func withPort(s corev1.Service, port int32) corev1.Service {
	s.Spec.Ports = []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: port}}
	return s
}

func deleting(s corev1.Service) corev1.Service {
	s.DeletionTimestamp = ptr.To(metav1.Now())
	return s
}

// recording is a claim's allocation placeholder MetalLB assigned ip, before
// the hand-over.
func recording(claimUID, ip string) corev1.Service {
	s := svc(phNS, "alloc-ipv4-"+claimUID, "", ip)
	s.Labels = map[string]string{marks.LabelPlaceholder: names.PlaceholderAllocation, marks.LabelClaimUID: claimUID}
	return s
}

// heldReleased gives a the Held condition of an address released for a
// workload.
func reportingReleased(a *iadv1alpha1.IPAddress) *iadv1alpha1.IPAddress {
	a.Status.Conditions = []metav1.Condition{{Type: conditions.Held, Status: metav1.ConditionFalse, Reason: conditions.ReasonReleasedForWorkload}}
	return a
}
