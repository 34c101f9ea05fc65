package service

import (
	"context"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/parking"
	"github.com/cozystack/metallb-iad/internal/patch"
	"github.com/cozystack/metallb-iad/internal/phase"
)

// attach runs, for an Associate verdict, the forward handoff: it detaches
// the addresses of a previous claim (detachStale), takes the attach grant,
// then runs the shared or the gap handoff (attachMode). Every step checks
// the cluster first, so any prefix of either re-converges after a crash.
func (r *Reconciler) attach(ctx context.Context, s *scope) (phase.Result, error) {
	if s.verdict.Action != Associate {
		return phase.Next(), nil
	}
	svc := s.svc
	ips := addressIPs(s.addrs)
	if !marks.HoldsAll(svc, ips...) {
		r.handoffs.start(s.key, svc.UID)
	}
	if res, err := r.detachStale(ctx, s); err != nil || res.State != phase.Done {
		return res, err
	}
	mode, why, key, err := r.attachMode(ctx, s, ips)
	if err != nil {
		return phase.Next(), err
	}
	if mode == ModeShared {
		// The shared handoff pins before it associates: the attach grant
		// is its lock. The other handoffs associate first, and the
		// association, written locked, is theirs.
		if err := r.grantAttach(ctx, s); err != nil {
			return phase.Next(), err
		}
		return r.associateShared(ctx, s, ips, key)
	}
	return r.associateGap(ctx, s, ips, key, mode, why)
}

// attachMode chooses the handoff (AttachMode) and the sharing key the
// Service is pinned with: the claim's key whenever it can share and the
// hold does not park, whichever handoff attaches it, so that its detach
// can be a shared one; "" otherwise.
func (r *Reconciler) attachMode(ctx context.Context, s *scope, ips []string) (mode, why, key string, err error) {
	svc := s.svc
	key = SharingKeyOf(r.Keys, s.addrs)
	problem := ShareProblem(svc, key)
	released := false
	for _, a := range s.addrs {
		released = released || (Released(a) && AssociatedWith(a, svc.Namespace, svc.Name))
	}
	// A shared handoff under way (the Service carries the claim's key) is
	// finished as one.
	parkable, err := r.parkable(ctx, s.addrs)
	if err != nil {
		return "", "", "", err
	}
	parkable = parkable && !marks.Of(svc).SharesOurKey()
	mode, why = AttachMode(problem, released, marks.HoldsAll(svc, ips...), parkable)
	if problem != "" || mode == ModeParked {
		key = ""
	}
	return mode, why, key, nil
}

// parkable reports whether the parking pool can take a placeholder of each
// address: the IPAddress controller then parks the holds (the same test,
// parking.Serves, on its own cache).
func (r *Reconciler) parkable(ctx context.Context, addrs []*iadv1alpha1.IPAddress) (bool, error) {
	pool, err := parking.Get(ctx, r, r.MetalLBNamespace, r.ParkingPool)
	if pool == nil || err != nil {
		return false, err
	}
	var ips []netip.Addr
	for _, a := range addrs {
		if ip, err := names.ParseAddress(a.Spec.Address); err == nil {
			ips = append(ips, ip)
		}
	}
	return parking.ServesAll(pool, ips), nil
}

// associateShared is the shared handoff (docs/design.md, section 4): once
// every placeholder holding the addresses carries the claim's key
// (UnkeyedHolder), pin the Service with the key; once it holds every
// address, record the associations. The placeholders keep holding the
// addresses throughout the attachment.
func (r *Reconciler) associateShared(ctx context.Context, s *scope, ips []string, key string) (phase.Result, error) {
	svc := s.svc
	pin := marks.PinValue(ips)
	if !marks.HoldsAll(svc, ips...) {
		for _, ip := range ips {
			var holders corev1.ServiceList
			if err := r.List(ctx, &holders, client.MatchingFields{index.ServiceByIngressIP: ip}); err != nil {
				return phase.Next(), err
			}
			if h := UnkeyedHolder(holders.Items, key, r.PlaceholderNamespace); h != nil {
				// The placeholder's watch brings the Service back (sharersOfPlaceholder).
				return phase.WaitFor("the hold placeholder "+h.Name+" to carry the claim's sharing key", 0), nil
			}
		}
	}
	if _, err := r.pin(ctx, s, pin, key); err != nil {
		return phase.Next(), err
	}
	if !marks.HoldsAll(svc, ips...) {
		return phase.WaitFor("MetalLB to share the addresses with the Service", 0), nil
	}
	newly, err := r.recordAssociation(ctx, s)
	if err != nil {
		return phase.Next(), err
	}
	if newly {
		r.recordAssociated(s, pin, ModeShared, "")
	}
	r.handoffs.done(s.key, svc.UID, ModeShared)
	return phase.Next(), nil
}

// associateGap is the gap handoff, or the parked one (mode): record the
// associations (this disarms the holds), wait until each address is
// Released, then pin the Service with key ("" when it cannot or need not
// share); problem says why a gap handoff does not share.
func (r *Reconciler) associateGap(ctx context.Context, s *scope, ips []string, key, mode, problem string) (phase.Result, error) {
	svc := s.svc
	newly, err := r.recordAssociation(ctx, s)
	if err != nil {
		return phase.Next(), err
	}
	released := true
	for _, a := range s.addrs {
		moved, err := r.parkedAway(ctx, s, a, mode)
		if err != nil {
			return phase.Next(), err
		}
		if Released(a) || moved {
			r.handoffs.released(s.key, svc.UID)
		} else {
			released = false
		}
	}
	if !released {
		return phase.WaitFor("the holds to let go of the addresses", 0), nil
	}

	pin := marks.PinValue(ips)
	pinned, err := r.pin(ctx, s, pin, key)
	if err != nil {
		return phase.Next(), err
	}
	if pinned || (newly && marks.Of(svc).HandPin() != "") {
		r.recordAssociated(s, pin, mode, problem)
	}
	if !marks.HoldsAll(svc, ips...) {
		return phase.WaitFor("MetalLB to assign the addresses to the Service", 0), nil
	}
	r.handoffs.done(s.key, svc.UID, mode)
	return phase.Next(), nil
}

// parkedAway reports, in a parked handoff, whether this controller's own
// cache shows the address free for the Service (ParkedAway): then it pins
// at once, without waiting for the IPAddress controller to say so.
func (r *Reconciler) parkedAway(ctx context.Context, s *scope, a *iadv1alpha1.IPAddress, mode string) (bool, error) {
	if mode != ModeParked || !AssociatedWith(a, s.svc.Namespace, s.svc.Name) {
		return false, nil
	}
	ip, err := names.ParseAddress(a.Spec.Address)
	if err != nil {
		return false, nil
	}
	var phs, holders corev1.ServiceList
	if err := r.List(ctx, &phs, client.InNamespace(r.PlaceholderNamespace), client.MatchingFields{index.PlaceholderByAddress: a.Name}); err != nil {
		return false, err
	}
	if err := r.List(ctx, &holders, client.MatchingFields{index.ServiceByIngressIP: ip.String()}); err != nil {
		return false, err
	}
	return ParkedAway(ip.String(), r.ParkingPool, phs.Items, holders.Items, s.svc), nil
}

// recordAssociated records the handoff's one Event, on the Service; each
// address says the same in status.associatedTo and its Held condition.
func (r *Reconciler) recordAssociated(s *scope, pin, mode, problem string) {
	r.Recorder.Event(s.svc, corev1.EventTypeNormal, ReasonAssociated, msgAssociated(s.claimName, pin, mode, problem))
}

// grantAttach takes the attach grant on each of the claim's addresses, in
// name order, with an optimistic lock, before anything is pinned: of two
// Services racing for the claim exactly one gets it, and the other sees
// the grant (observeAttachGrant) before it is ever pinned.
func (r *Reconciler) grantAttach(ctx context.Context, s *scope) error {
	me := index.Key(s.svc.Namespace, s.svc.Name)
	for _, a := range s.addrs {
		if marks.Attaching(a) == me {
			continue
		}
		if err := patch.Meta(ctx, r, a, func() { marks.GrantAttach(a, s.svc.Namespace, s.svc.Name) }); err != nil {
			return err
		}
		log.FromContext(ctx).V(1).Info("took the attach grant", "address", a.Name)
	}
	return nil
}

// recordAssociation records status.associatedTo naming the Service on the
// claim's addresses, in name order so that two racing Services collide on
// the first. It reports whether it wrote any.
func (r *Reconciler) recordAssociation(ctx context.Context, s *scope) (bool, error) {
	wrote := false
	for _, a := range s.addrs {
		if AssociatedWith(a, s.svc.Namespace, s.svc.Name) {
			continue
		}
		if err := patch.Status(ctx, r, a, func() {
			a.Status.AssociatedTo = &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: s.svc.Namespace, Name: s.svc.Name}
		}); err != nil {
			return wrote, err
		}
		log.FromContext(ctx).Info("associated address", "address", a.Name, "ip", a.Spec.Address, "claim", s.claimName)
		wrote = true
	}
	return wrote, nil
}

// pin writes the pin (PinMarks) and the grant label in one patch. A pin
// the driver did not write that asks for exactly these addresses stays the
// tenant's. It reports whether it pinned.
func (r *Reconciler) pin(ctx context.Context, s *scope, value, key string) (bool, error) {
	svc := s.svc
	m, took := PinMarks(marks.Of(svc), s.claimName, value, key, ClassOf(s.addrs))
	pinning := m.AnnotationsChanged()
	if !m.Changed() {
		return false, nil
	}
	read := svc.ResourceVersion
	if err := patch.Meta(ctx, r, svc, func() { m.Apply(svc) }); err != nil {
		return false, err
	}
	if took != "" && svc.ResourceVersion != read {
		r.Recorder.Event(svc, corev1.EventTypeNormal, ReasonPoolRequestTakenOver, msgPoolRequestTakenOver(took, value))
	}
	if svc.ResourceVersion == read || !pinning {
		return false, nil // the cache lagged, or only the grant label was missing (an attachment made by an older driver)
	}
	log.FromContext(ctx).Info("pinned", "loadBalancerIPs", value, "claim", s.claimName, "shared", key != "")
	return true, nil
}
