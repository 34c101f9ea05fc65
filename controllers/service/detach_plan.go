package service

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
)

// releaseFacts is what release decides on (planRelease).
type releaseFacts struct {
	// Active: the driver's pin is on a Service not being deleted (its
	// deletion frees the addresses), and there are addresses.
	Active, Deleting, GivingUp bool
	IPs                        []string
	// Release is the release pin; "" when the pools require the grant
	// (ByGrant) and the addresses are kept: withdrawing the label releases.
	Release          string
	ByGrant, Started bool
	Mode             string
	// All: everything the Service holds or is pinned for; Asks: it still
	// asks for their claim. HeldBeside is read for a oneWriteCandidate only.
	All, Asks, HeldBeside, Holds, LettingGo bool
}

// oneWriteCandidate: the Service may be let go in one write (marks.LetGo)
// once its mode allows it.
func (f releaseFacts) oneWriteCandidate() bool {
	return !f.Started && f.All && f.ByGrant && !f.Asks
}

// releaseStep is release's next step.
type releaseStep int

const (
	releaseClear    releaseStep = iota // clear the associations: done
	releaseWait                        // MetalLB has not let go; the Service watch brings it back
	releaseLetGo                       // detach in one write
	releaseHandBack                    // shared: clear the associations, then once handed back, releaseWrite
	releaseWrite                       // the release pin, or the pin and the grant label withdrawn
)

// planRelease is the detach of docs/design.md, section 4 (Detaching) and
// section 5 (Detach in one write).
func planRelease(f releaseFacts) releaseStep {
	if f.Active {
		switch {
		case f.oneWriteCandidate() && (f.Mode == ModeGap || f.HeldBeside):
			return releaseLetGo
		case !f.Started && f.Mode == ModeShared:
			return releaseHandBack
		case !f.Started:
			return releaseWrite
		case f.Holds:
			return releaseWait
		}
	}
	if !f.Deleting && f.LettingGo {
		return releaseWait // the association keeps the Service authorized until MetalLB lets go
	}
	return releaseClear
}

// DetachMode chooses the handoff that detaches a Service from addresses
// with the canonical ips and sharing key: shared when the addresses are
// kept, the Service holds them with the driver's key, that key is theirs
// and nothing else keeps it from sharing; gap otherwise.
func DetachMode(svc *corev1.Service, ips []string, key string, givingUp bool) string {
	if m := marks.Of(svc); !givingUp && marks.Holds(svc, ips...) && m.SharesOurKey() &&
		m.Sharing == key && ShareProblem(svc, key) == "" {
		return ModeShared
	}
	return ModeGap
}

// givingUp reports whether addrs are given up rather than kept: one is
// being deleted, or the claim the pin is for is gone or being deleted and
// one of them goes with it (reclaimPolicy Delete; under Retain they stay
// held, Released, and are detached as usual).
func (s *scope) givingUp(addrs []*iadv1alpha1.IPAddress) bool {
	deletes := false
	for _, a := range addrs {
		if a.DeletionTimestamp != nil {
			return true
		}
		deletes = deletes || a.Spec.ReclaimPolicy == iadv1alpha1.ReclaimDelete
	}
	// A Service that names no claim and carries no marker (let go in one
	// write) tells no claim to give up: its addresses are kept.
	if by := s.pinClaim(); !deletes || by == "" || by != s.claimName {
		return false
	}
	return s.claim == nil || s.claim.DeletionTimestamp != nil
}

// pinClaim is the claim the Service's pin is for: its pinned-by marker, or
// else the claim its annotation names.
func (s *scope) pinClaim() string {
	if by := s.marks.PinnedBy; by != "" {
		return by
	}
	return s.claimName
}

// held are the addresses the Service is associated with or pinned for.
func (s *scope) held() []*iadv1alpha1.IPAddress {
	addrs := slices.Clone(s.mine)
	for _, a := range s.pinnedFor {
		if !containsAddress(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// stale are those of held the claim no longer has.
func (s *scope) stale() []*iadv1alpha1.IPAddress {
	var out []*iadv1alpha1.IPAddress
	for _, a := range s.held() {
		if !containsAddress(s.addrs, a) {
			out = append(out, a)
		}
	}
	return out
}

// asksFor reports whether the Service's annotation still names the claim
// of one of addrs: marks.LetGo tells a Service let go from one a gap
// handoff is attaching by the annotation, so such a one is not let go.
func asksFor(svc *corev1.Service, addrs []*iadv1alpha1.IPAddress) bool {
	m := marks.Of(svc)
	return slices.ContainsFunc(addrs, func(a *iadv1alpha1.IPAddress) bool { return m.Asks(a) })
}

// lettingGo reports whether one of addrs was let go in one write and the
// Service's ingress still shows it.
func lettingGo(svc *corev1.Service, addrs []*iadv1alpha1.IPAddress) bool {
	for _, a := range addrs {
		if marks.LetGo(a, svc) && marks.Holds(svc, addressIPs([]*iadv1alpha1.IPAddress{a})...) {
			return true
		}
	}
	return false
}

// HandedBack reports whether a Service being detached may let MetalLB take
// the address back without leaving it unheld: it is attached to another
// workload now, or held again, as both the IPAddress controller (Held
// True) and the cache (HeldBeside; holders show the address's IP) say.
func HandedBack(a *iadv1alpha1.IPAddress, svc *corev1.Service, holders []corev1.Service, placeholderNamespace string) bool {
	if at := a.Status.AssociatedTo; at != nil {
		return !AssociatedWith(a, svc.Namespace, svc.Name)
	}
	if !conditions.IsTrue(a.Status.Conditions, conditions.Held) {
		return false
	}
	return HeldBeside(a, holders, placeholderNamespace)
}

// HeldBeside reports whether one of the address's own placeholders is
// among holders and holds it (in a shared attachment, beside the Service).
func HeldBeside(a *iadv1alpha1.IPAddress, holders []corev1.Service, placeholderNamespace string) bool {
	ips := addressIPs([]*iadv1alpha1.IPAddress{a})
	for i := range holders {
		h := &holders[i]
		if marks.Exempt(h, placeholderNamespace) && h.Labels[marks.LabelAddress] == a.Name && marks.Holds(h, ips...) {
			return true
		}
	}
	return false
}
