package service

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
)

// Action is what a reconcile pass does about a Service's association.
type Action int

const (
	Keep Action = iota
	// Detach withdraws the driver's pin and clears every association.
	Detach
	// Associate runs the handoff for the claim the Service names.
	Associate
)

func (a Action) String() string {
	switch a {
	case Keep:
		return "Keep"
	case Detach:
		return "Detach"
	case Associate:
		return "Associate"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Situation is what the association decision depends on.
type Situation struct {
	// Claim is the claim the Service's annotation names ("" if none).
	Claim string
	// ClaimNameProblem is marks.ClaimNameProblem's answer: the annotation
	// names no claim, and nothing was looked up.
	ClaimNameProblem       string
	Deleting, LoadBalancer bool
	// ForeignGateway is GatewayOf's Gateway.ForeignTo: why a Service the
	// Gateway API implementation created must not take a claim of its
	// namespace ("" for any other Service).
	ForeignGateway string
	// GatewayCompanion: the Service is not of type LoadBalancer and the
	// implementation runs it for a Gateway (marks.GatewayOf) beside the
	// Gateway's LoadBalancer Service. It carries the claim annotation
	// because implementations copy spec.infrastructure.annotations onto
	// every object they create for the Gateway (Contour's contour-<name>),
	// and it is not the Gateway's address: nothing to tell.
	GatewayCompanion bool
	// OtherClass is the Service's spec.loadBalancerClass when it is not
	// the one MetalLB serves ("" when it is): another load balancer's.
	OtherClass string
	// MetalLBClass is the class MetalLB serves ("": none).
	MetalLBClass  string
	ClaimFound    bool
	ClaimDeleting bool
	ClaimPhase    iadv1alpha1.IPAddressClaimPhase
	// FamilyProblem is FamilyMismatch's answer.
	FamilyProblem string
	// Wanted is how many addresses the claim's family needs (2 for Dual).
	Wanted int
	// NotAdmittedBy names the class of the claim's addresses when it does
	// not admit the Service's namespace.
	NotAdmittedBy string
	// Ours and Foreign count the claim's bound addresses of served and
	// of other drivers' classes; AssociatedHere those associated here.
	Ours, Foreign  int
	AssociatedHere int
	// OtherHolder names another live holder of one of the claim's
	// addresses; OtherDetaching says it is on its way out.
	OtherHolder    string
	OtherDetaching bool
	// HandPin is a MetalLB pin the driver did not write (PinValue form);
	// Desired is the pin the claim's addresses call for.
	HandPin, Desired string
}

// Verdict is the decision for one pass and the Event to record on the
// Service.
type Verdict struct {
	Action Action
	// EventType is "" when there is nothing to tell.
	EventType, Reason, Message string
	// Wait names what a Keep waits for, "" when it waits for nothing.
	Wait string
}

// Decide is the association decision table.
func Decide(s Situation) Verdict {
	switch {
	case s.Deleting || s.Claim == "":
		return Verdict{Action: Detach}
	case s.ClaimNameProblem != "":
		return Verdict{Action: Detach, EventType: corev1.EventTypeWarning, Reason: ReasonClaimNameInvalid,
			Message: msgClaimNameInvalid(s.Claim, s.ClaimNameProblem)}
	case !s.LoadBalancer && s.GatewayCompanion:
		return Verdict{Action: Detach}
	case !s.LoadBalancer:
		return Verdict{Action: Detach, EventType: corev1.EventTypeWarning, Reason: ReasonNotLoadBalancer,
			Message: msgNotLoadBalancer(s.Claim)}
	case s.OtherClass != "":
		return Verdict{Action: Detach, EventType: corev1.EventTypeWarning, Reason: ReasonOtherLoadBalancerClass,
			Message: msgOtherLoadBalancerClass(s.OtherClass, s.MetalLBClass, s.Claim)}
	case s.ForeignGateway != "":
		return Verdict{Action: Detach, EventType: corev1.EventTypeWarning, Reason: ReasonGatewayInOtherNamespace,
			Message: msgGatewayInOtherNamespace(s.ForeignGateway, s.Claim)}
	case !s.ClaimFound:
		return Verdict{Action: Detach, EventType: corev1.EventTypeWarning, Reason: ReasonClaimNotFound,
			Message: msgClaimNotFound(s.Claim)}
	case s.ClaimDeleting:
		return Verdict{Action: Detach, EventType: corev1.EventTypeNormal, Reason: ReasonClaimDeleted,
			Message: msgClaimDeleted(s.Claim)}
	case s.FamilyProblem != "":
		return Verdict{Action: Detach, EventType: corev1.EventTypeWarning, Reason: ReasonFamilyMismatch, Message: s.FamilyProblem}
	case s.ClaimPhase != iadv1alpha1.ClaimBound && s.AssociatedHere > 0:
		// A bound claim that lost one address keeps the rest attached.
		return Verdict{Action: Keep}
	case s.ClaimPhase != iadv1alpha1.ClaimBound:
		phase := string(s.ClaimPhase)
		if phase == "" {
			phase = string(iadv1alpha1.ClaimPending)
		}
		return Verdict{Action: Detach, EventType: corev1.EventTypeNormal, Reason: ReasonClaimNotBound,
			Message: msgClaimNotBound(s.Claim, phase)}
	case s.Ours == 0 && s.Foreign > 0:
		return Verdict{Action: Detach, EventType: corev1.EventTypeWarning, Reason: ReasonClaimNotServed,
			Message: msgClaimNotServed(s.Claim)}
	case s.NotAdmittedBy != "" && s.AssociatedHere == 0:
		// An attachment made while the namespace was admitted is kept.
		return Verdict{Action: Detach, EventType: corev1.EventTypeWarning, Reason: ReasonNamespaceNotAdmitted,
			Message: msgNamespaceNotAdmitted(s.Claim, s.NotAdmittedBy)}
	case s.Ours < s.Wanted:
		// The cache does not show every address yet; their watch brings
		// the Service back.
		return Verdict{Action: Keep, Wait: "the cache to show every address of the claim"}
	case s.OtherHolder != "" && s.OtherDetaching:
		return Verdict{Action: Detach, EventType: corev1.EventTypeNormal, Reason: ReasonWaitingForDetach,
			Message: msgWaitingForDetach(s.Claim, s.OtherHolder)}
	case s.OtherHolder != "":
		return Verdict{Action: Detach, EventType: corev1.EventTypeWarning, Reason: ReasonClaimAlreadyAssociated,
			Message: msgClaimAlreadyAssociated(s.Claim, s.OtherHolder)}
	case s.HandPin != "" && s.HandPin != s.Desired:
		return Verdict{Action: Detach, EventType: corev1.EventTypeWarning, Reason: ReasonPinnedByHand,
			Message: msgPinnedByHand(s.HandPin, s.Claim, s.Desired)}
	}
	return Verdict{Action: Associate}
}

// otherClass is svc's spec.loadBalancerClass when MetalLB, serving
// metallbClass ("": the Services without one), does not serve it.
func otherClass(svc *corev1.Service, metallbClass string) string {
	class := ""
	if svc.Spec.LoadBalancerClass != nil {
		class = *svc.Spec.LoadBalancerClass
	}
	if class == metallbClass {
		return ""
	}
	if class == "" {
		return "(none)"
	}
	return class
}

// gatewayCompanion says svc is a Service of another type than
// LoadBalancer that a Gateway API implementation runs for a Gateway.
func gatewayCompanion(svc *corev1.Service) bool {
	_, ok := marks.GatewayOf(svc)
	return ok && svc.Spec.Type != corev1.ServiceTypeLoadBalancer
}

// foreignGateway is Gateway.ForeignTo for the Gateway svc serves.
func foreignGateway(svc *corev1.Service) string {
	if gw, ok := marks.GatewayOf(svc); ok {
		return gw.ForeignTo(svc.Namespace)
	}
	return ""
}

// FamilyMismatch explains why a claim of family f cannot serve the Service
// ("" when it can): MetalLB wants exactly one address per family of the Service.
func FamilyMismatch(svc *corev1.Service, claim string, f iadv1alpha1.IPFamily) string {
	if f == "" {
		f = iadv1alpha1.FamilyIPv4
	}
	fams := marks.ServiceFamilies(svc)
	policy := corev1.IPFamilyPolicySingleStack
	if svc.Spec.IPFamilyPolicy != nil {
		policy = *svc.Spec.IPFamilyPolicy
	}
	switch {
	case len(fams) == 0:
		// Families unknown (not defaulted yet): only the policy tells.
		if f == iadv1alpha1.FamilyDual && policy == corev1.IPFamilyPolicySingleStack {
			return msgDualOnUnknownFamilies(claim)
		}
		return ""
	case len(fams) == 1 && f == iadv1alpha1.FamilyDual:
		return msgDualOnSingleStack(claim, fams[0])
	case len(fams) == 1 && string(fams[0]) != string(f):
		return msgOtherFamily(claim, f, fams[0])
	case len(fams) == 2 && f != iadv1alpha1.FamilyDual:
		return msgSingleOnDualStack(claim, f, fams)
	}
	return ""
}

// situation reduces the scope to the decision's inputs; metallbClass is
// the spec.loadBalancerClass MetalLB serves.
func (s *scope) situation(metallbClass string) Situation {
	sit := Situation{
		Claim:            s.claimName,
		ClaimNameProblem: s.claimNameProblem,
		Deleting:         s.svc.DeletionTimestamp != nil,
		LoadBalancer:     s.svc.Spec.Type == corev1.ServiceTypeLoadBalancer,
		OtherHolder:      s.otherHolder,
		OtherDetaching:   s.otherDetaching,
		HandPin:          s.marks.HandPin(),
		ForeignGateway:   foreignGateway(s.svc),
		GatewayCompanion: gatewayCompanion(s.svc),
		OtherClass:       otherClass(s.svc, metallbClass),
		MetalLBClass:     metallbClass,
		Desired:          marks.PinValue(addressIPs(s.addrs)),
	}
	if c := s.claim; c != nil {
		sit.ClaimFound = true
		sit.ClaimDeleting = c.DeletionTimestamp != nil
		sit.ClaimPhase = c.Status.Phase
		sit.FamilyProblem = FamilyMismatch(s.svc, c.Name, c.Spec.Family)
		sit.Wanted = len(c.Spec.Family.Families())
		sit.Ours = len(s.addrs)
		sit.Foreign = s.foreign
		sit.NotAdmittedBy = s.notAdmittedBy
		for _, a := range s.addrs {
			if AssociatedWith(a, s.svc.Namespace, s.svc.Name) {
				sit.AssociatedHere++
			}
		}
	}
	return sit
}
