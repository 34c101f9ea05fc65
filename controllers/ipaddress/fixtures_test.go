package ipaddress

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
)

const phNS = "iad-system"

func address(name, ip string) *iadv1alpha1.IPAddress {
	return &iadv1alpha1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: "addr-uid"},
		Spec: iadv1alpha1.IPAddressSpec{Address: ip, ClassName: "gold",
			Source: iadv1alpha1.IPAddressSource{FromClass: &iadv1alpha1.FromClassSource{}}},
	}
}

func bound(a *iadv1alpha1.IPAddress, ns, claim string) *iadv1alpha1.IPAddress {
	a.Spec.ClaimRef = &iadv1alpha1.ClaimReference{Namespace: ns, Name: claim, UID: "claim-uid"}
	return a
}

func associated(a *iadv1alpha1.IPAddress, ns, name string) *iadv1alpha1.IPAddress {
	a.Status.AssociatedTo = &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: ns, Name: name}
	return a
}

// svc builds a Service; pin and ingress may be empty.
func svc(ns, name, pin, ingress string, annotations ...string) corev1.Service {
	s := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), Annotations: map[string]string{}}}
	if pin != "" {
		s.Annotations[marks.KeyPin] = pin
	}
	for i := 0; i+1 < len(annotations); i += 2 {
		s.Annotations[annotations[i]] = annotations[i+1]
	}
	if ingress != "" {
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ingress}}
	}
	return s
}

// sharingWorkload is Service t/web attached to claim t/c in a shared
// attachment: the driver's pin and the claim's sharing key.
func sharingWorkload(pin, ingress string) corev1.Service {
	return svc("t", "web", pin, ingress, marks.KeyPinnedBy, "c",
		marks.KeySharing, marks.Keys{}.Claim("t", "c", "claim-uid"), marks.KeySharedBy, "c")
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

func svcNames(list []*corev1.Service) []string {
	var out []string
	for _, s := range list {
		out = append(out, s.Namespace+"/"+s.Name)
	}
	return out
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
