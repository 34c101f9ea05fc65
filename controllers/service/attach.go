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

// handoffPlan is how chooseHandoff attaches the Service.
type handoffPlan struct {
	// mode is the handoff (AttachMode); why says why a gap handoff does
	// not share.
	mode, why string
	// key is the sharing key the Service is pinned with; "" for none.
	key string
	// ips are the canonical IPs of the claim's addresses, pin their pin;
	// ipOf names each address's canonical IP.
	ips  []string
	pin  string
	ipOf map[string]string
	// holdsAll: the Service holds every one of ips; hand: it carries a
	// pin of its own (marks.Marks.HandPin), which stays the owner's.
	holdsAll, hand bool
}

// chooseHandoff, for an Associate verdict, chooses the handoff
// (AttachMode) and the sharing key the Service is pinned with: the
// claim's key whenever it can share and the hold does not park, whichever
// handoff attaches it, so that its detach can be a shared one.
func (r *Reconciler) chooseHandoff(ctx context.Context, s *scope) (phase.Result, error) {
	if s.verdict.Action != Associate {
		return phase.Next(), nil
	}
	svc, h := s.svc, &s.handoff
	h.ips, h.ipOf = addressIPs(s.addrs), canonicalIPs(s.addrs)
	h.pin = marks.PinValue(h.ips)
	h.holdsAll = marks.HoldsAll(svc, h.ips...)
	h.hand = s.marks.HandPin() != ""
	if !h.holdsAll {
		r.handoffs.start(s.key, svc.UID)
	}
	h.key = marks.PairKey(svc, SharingKeyOf(r.Keys.Now(), s.addrs), h.ips...)
	problem := ShareProblem(svc, h.key)
	released := false
	for _, a := range s.addrs {
		released = released || (Released(a) && AssociatedWith(a, svc.Namespace, svc.Name))
	}
	parkable, err := r.parkable(ctx, s.addrs)
	if err != nil {
		return phase.Next(), err
	}
	// A shared handoff under way (the Service carries the claim's key) is
	// finished as one.
	parkable = parkable && !s.marks.SharesOurKey()
	h.mode, h.why = AttachMode(problem, released, h.holdsAll, parkable)
	if problem != "" || h.mode == ModeParked {
		h.key = ""
	}
	return phase.Next(), nil
}

// attach runs, for an Associate verdict, the handoff chooseHandoff chose.
// Every step checks the cluster first, so any prefix of either
// re-converges after a crash.
func (r *Reconciler) attach(ctx context.Context, s *scope) (phase.Result, error) {
	if s.verdict.Action != Associate {
		return phase.Next(), nil
	}
	var wait string
	var err error
	if s.handoff.mode == ModeShared {
		wait, err = r.associateShared(ctx, s)
	} else {
		wait, err = r.associateGap(ctx, s)
	}
	if err != nil || wait == "" {
		return phase.Next(), err
	}
	s.waitingFor = wait
	return phase.WaitFor(wait, 0), nil
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
// addresses throughout the attachment, under the key the pair shares
// (marks.PairKey: the Service's own after a rotation of the secret). It
// returns what the handoff waits for, "" once it is done.
func (r *Reconciler) associateShared(ctx context.Context, s *scope) (wait string, err error) {
	h := s.handoff
	if !h.holdsAll {
		for _, ip := range h.ips {
			var holders corev1.ServiceList
			if err := r.List(ctx, &holders, client.MatchingFields{index.ServiceByIngressIP: ip}); err != nil {
				return "", err
			}
			if ph := UnkeyedHolder(holders.Items, h.key, r.PlaceholderNamespace); ph != nil {
				// The placeholder's watch brings the Service back (sharersOfPlaceholder).
				return "the hold placeholder " + ph.Name + " to carry the claim's sharing key", nil
			}
		}
	}
	if _, err := r.pin(ctx, s); err != nil {
		return "", err
	}
	if !h.holdsAll {
		return "MetalLB to share the addresses with the Service", nil
	}
	newly, err := r.recordAssociation(ctx, s)
	if err != nil {
		return "", err
	}
	if newly {
		r.recordAssociated(s)
	}
	r.handoffs.done(s.key, s.svc.UID, ModeShared)
	return "", nil
}

// associateGap is the gap handoff, or the parked one: record the
// associations (this disarms the holds), wait until each address is
// Released (or, parked, moved away) and this controller's cache shows
// nothing about to take it (FreeFor), then pin the Service. It returns
// what the handoff waits for, "" once it is done.
func (r *Reconciler) associateGap(ctx context.Context, s *scope) (wait string, err error) {
	h := s.handoff
	newly, err := r.recordAssociation(ctx, s)
	if err != nil {
		return "", err
	}
	released := true
	for _, a := range s.addrs {
		free, moved, err := r.freeFor(ctx, s, a)
		if err != nil {
			return "", err
		}
		if Released(a) && free || moved {
			r.handoffs.released(s.key, s.svc.UID)
		} else {
			released = false
		}
	}
	if !released {
		return "the holds to let go of the addresses", nil
	}
	pinned, err := r.pin(ctx, s)
	if err != nil {
		return "", err
	}
	if pinned || (newly && h.hand) {
		r.recordAssociated(s)
	}
	if !h.holdsAll {
		return "MetalLB to assign the addresses to the Service", nil
	}
	r.handoffs.done(s.key, s.svc.UID, h.mode)
	return "", nil
}

// freeFor reports whether this controller's own cache shows the address
// free for the Service (FreeFor) and, in a parked handoff, whether its
// holds moved away (ParkedAway): then it pins at once, without waiting for
// the IPAddress controller to say so.
func (r *Reconciler) freeFor(ctx context.Context, s *scope, a *iadv1alpha1.IPAddress) (free, moved bool, err error) {
	ip := s.handoff.ipOf[a.Name]
	if ip == "" || !AssociatedWith(a, s.svc.Namespace, s.svc.Name) {
		return false, false, nil
	}
	var phs, holders corev1.ServiceList
	if err := r.List(ctx, &phs, client.InNamespace(r.PlaceholderNamespace), client.MatchingFields{index.PlaceholderByAddress: a.Name}); err != nil {
		return false, false, err
	}
	if err := r.List(ctx, &holders, client.MatchingFields{index.ServiceByIngressIP: ip}); err != nil {
		return false, false, err
	}
	free = FreeFor(ip, r.ParkingPool, phs.Items, holders.Items, s.svc)
	moved = s.handoff.mode == ModeParked && ParkedAway(ip, r.ParkingPool, phs.Items, holders.Items, s.svc)
	return free, moved, nil
}

// recordAssociated records the handoff's one Event, on the Service; each
// address says the same in status.associatedTo and its Held condition.
func (r *Reconciler) recordAssociated(s *scope) {
	h := s.handoff
	r.Recorder.Event(s.svc, corev1.EventTypeNormal, ReasonAssociated, msgAssociated(s.claimName, h.pin, h.mode, h.why))
}

// grantAttach takes the attach grant on each of the claim's addresses
// for the shared handoff, in name order, with an optimistic lock, before
// anything is pinned: of two Services racing for the claim exactly one
// gets it, and the other sees the grant (observeAttachGrant) before it is
// ever pinned. The shared handoff pins before it associates, so the grant
// is its lock; the other handoffs associate first, and the association,
// written locked, is theirs.
func (r *Reconciler) grantAttach(ctx context.Context, s *scope) (phase.Result, error) {
	if s.verdict.Action != Associate || s.handoff.mode != ModeShared {
		return phase.Next(), nil
	}
	me := index.Key(s.svc.Namespace, s.svc.Name)
	for _, a := range s.addrs {
		if marks.Attaching(a) == me {
			continue
		}
		if err := patch.Meta(ctx, r, a, func() { marks.GrantAttach(a, s.svc.Namespace, s.svc.Name) }); err != nil {
			return phase.Next(), err
		}
		log.FromContext(ctx).V(1).Info("took the attach grant", "address", a.Name)
	}
	return phase.Next(), nil
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
		s.status.set(a, func(st *iadv1alpha1.IPAddressStatus) {
			st.AssociatedTo = &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: s.svc.Namespace, Name: s.svc.Name}
		}, func() {
			log.FromContext(ctx).Info("associated address", "address", a.Name, "ip", a.Spec.Address, "claim", s.claimName)
		})
		wrote = true
	}
	// Flushed here, not when the pass ends: the association must land
	// before the pin (the gap and parked handoffs' lock: a crash between
	// the two leaves each address naming its Service, and a racing Service
	// conflicts here), and the shared handoff's Associated Event follows
	// it. No later phase sets these addresses' status, so this is their
	// one write of the pass (a Conflict set earlier goes with it).
	return wrote, s.status.flush(ctx, r)
}

// pin writes the attachment's marks (marks.Attach: the pin and the grant
// label) in one patch. A pin the driver did not write that asks for
// exactly these addresses stays the tenant's. It reports whether it pinned.
func (r *Reconciler) pin(ctx context.Context, s *scope) (bool, error) {
	svc, h := s.svc, s.handoff
	orig := svc.DeepCopy()
	a := s.marks.Attach(svc, s.claimName, h.pin, h.key, ClassOf(s.addrs))
	if !a.Changed {
		return false, nil
	}
	read := svc.ResourceVersion
	if err := patch.MetaSince(ctx, r, svc, orig); err != nil {
		return false, err
	}
	if a.Took != "" && svc.ResourceVersion != read {
		r.Recorder.Event(svc, corev1.EventTypeNormal, ReasonPoolRequestTakenOver, msgPoolRequestTakenOver(a.Took, h.pin))
	}
	if svc.ResourceVersion == read || !a.Pinned {
		return false, nil // the cache lagged, or only the grant label was written (a pin of the Service's own, or a label removed by hand)
	}
	log.FromContext(ctx).Info("pinned", "loadBalancerIPs", h.pin, "claim", s.claimName, "shared", h.key != "")
	return true, nil
}
