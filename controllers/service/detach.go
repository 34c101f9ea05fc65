package service

import (
	"context"

	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/patch"
	"github.com/cozystack/metallb-iad/internal/phase"
)

// detach, for a Detach verdict, detaches every address the Service is
// associated with or pinned for (release), then withdraws the driver's
// pin, key, markers and the grant label (withdraw).
func (r *Reconciler) detach(ctx context.Context, s *scope) (phase.Result, error) {
	if s.verdict.Action != Detach {
		return phase.Next(), nil
	}
	r.handoffs.forget(s.key)
	addrs := s.held()
	givingUp := s.givingUp(addrs) // as the addresses were before the release
	if wait, err := r.release(ctx, s, addrs, true); err != nil || wait != "" {
		return phase.HaltFor(wait, 0), err
	}
	return phase.Next(), r.withdraw(ctx, s, addrs, givingUp)
}

// detachStale, for an Associate verdict, detaches the addresses the claim
// no longer has (release) before the attach runs; the Service keeps its
// pin for the others.
func (r *Reconciler) detachStale(ctx context.Context, s *scope) (phase.Result, error) {
	if s.verdict.Action != Associate {
		return phase.Next(), nil
	}
	stale := s.stale()
	if len(stale) == 0 {
		return phase.Next(), nil
	}
	if wait, err := r.release(ctx, s, stale, false); err != nil || wait != "" {
		return phase.HaltFor(wait, 0), err
	}
	return phase.Next(), nil
}

// release detaches addrs (all: everything the Service holds or is pinned
// for): observeRelease, planRelease, then the step. It is done ("") once
// the associations are cleared; until then it returns what it waits for,
// MetalLB or a placeholder, whose writes bring the Service back: the pass
// ends there.
func (r *Reconciler) release(ctx context.Context, s *scope, addrs []*iadv1alpha1.IPAddress, all bool) (wait string, err error) {
	f, err := r.observeRelease(ctx, s, addrs, all)
	if err != nil {
		return "", err
	}
	const takeBack = "MetalLB to take the addresses back"
	switch planRelease(f) {
	case releaseWait:
		return takeBack, nil
	case releaseLetGo:
		return takeBack, r.letGo(ctx, s, f.IPs, f.Mode)
	case releaseHandBack:
		back, err := r.handBack(ctx, s, addrs, f.IPs)
		if err != nil || !back {
			return "a placeholder to hold the addresses again", err
		}
		return takeBack, r.writeRelease(ctx, s, f)
	case releaseWrite:
		return takeBack, r.writeRelease(ctx, s, f)
	}
	_, err = r.clearAssociations(ctx, s, addrs, f.GivingUp)
	return "", err
}

// observeRelease reads, from the cache, what release decides on.
func (r *Reconciler) observeRelease(ctx context.Context, s *scope, addrs []*iadv1alpha1.IPAddress, all bool) (releaseFacts, error) {
	svc := s.svc
	m := marks.Of(svc)
	ours := m.PinnedBy != ""
	f := releaseFacts{
		Deleting: svc.DeletionTimestamp != nil, GivingUp: s.givingUp(addrs), IPs: addressIPs(addrs),
		All: all, Asks: asksFor(svc, addrs), LettingGo: lettingGo(svc, addrs),
	}
	f.Holds = marks.Holds(svc, f.IPs...)
	// A Service whose annotations were rewritten wholesale (Contour's
	// provisioner writes a Gateway's Service that way) lost the driver's
	// pin and markers but keeps the grant label and, in MetalLB, the
	// addresses: released as if pinned, or they would stay its own.
	wiped := !ours && m.Grant != "" && m.HandPin() == "" && f.Holds
	f.Active = (ours || wiped) && !f.Deleting && len(addrs) > 0
	if !f.Active {
		return f, nil
	}
	// An address given up is released with the release pin, as the
	// IPAddress controller's teardown does, so the two agree.
	f.Release = marks.ReleasePinValue(svc)
	if !f.GivingUp {
		var err error
		if f.ByGrant, err = r.poolsRequireGrant(ctx, addrs); err != nil {
			return f, err
		}
		if f.ByGrant {
			f.Release = ""
		}
	}
	f.Started = m.ReleaseStarted(f.Release)
	f.Mode = DetachMode(svc, f.IPs, marks.PairKey(svc, SharingKeyOf(r.Keys.Now(), addrs), f.IPs...), f.GivingUp)
	if f.oneWriteCandidate() && f.Mode != ModeGap {
		var err error
		if f.HeldBeside, err = r.heldBeside(ctx, addrs); err != nil {
			return f, err
		}
	}
	return f, nil
}

// handBack clears the associations of addrs and reports whether each is
// handed back (HandedBack); in a shared attachment the placeholder held
// them throughout, so they are at once.
func (r *Reconciler) handBack(ctx context.Context, s *scope, addrs []*iadv1alpha1.IPAddress, ips []string) (bool, error) {
	cleared, err := r.clearAssociations(ctx, s, addrs, false)
	if err != nil {
		return false, err
	}
	back, err := r.handedBack(ctx, s, addrs)
	if err != nil {
		return false, err
	}
	if cleared && !back {
		r.Recorder.Event(s.svc, corev1.EventTypeNormal, ReasonHandingBack, msgHandingBack(ips))
	}
	return back, nil
}

// writeRelease replaces the pin with f.Release (marks.Marks.Release)
// and withdraws the sharing key and the grant label, so MetalLB takes the
// addresses back; the pinned-by marker keeps the Service authorized.
func (r *Reconciler) writeRelease(ctx context.Context, s *scope, f releaseFacts) error {
	svc := s.svc
	holds, class := marks.Holds(svc, f.IPs...), marks.Of(svc).Grant
	if err := patch.Meta(ctx, r, svc, func() {
		marks.Edit(svc, func(m *marks.Marks) {
			m.Release(f.Release)
			m.Grant = ""
		})
	}); err != nil {
		return err
	}
	log.FromContext(ctx).Info("releasing addresses from MetalLB", "ips", f.IPs, "mode", f.Mode, "byGrant", f.ByGrant, "givingUp", f.GivingUp)
	if f.GivingUp {
		r.Recorder.Event(svc, corev1.EventTypeNormal, ReasonReleasing, msgGivingUp(s.pinClaim(), f.IPs, f.Release))
	} else {
		r.Recorder.Event(svc, corev1.EventTypeNormal, ReasonReleasing, msgReleasing(f.IPs, f.Release, f.Mode, class))
	}
	if holds && !f.GivingUp {
		handoffsTotal.WithLabelValues(directionDetach, f.Mode).Inc()
	}
	return nil
}

// letGo detaches the Service in one write (marks.LetGo): the pin, the
// key, the markers and the grant label go together, while the addresses
// stay associated with it until MetalLB has taken them back.
func (r *Reconciler) letGo(ctx context.Context, s *scope, ips []string, mode string) error {
	svc := s.svc
	holds, class := marks.Holds(svc, ips...), marks.Of(svc).Grant
	if err := patch.Meta(ctx, r, svc, func() {
		marks.Edit(svc, func(m *marks.Marks) {
			m.Withdraw()
			m.Grant = ""
		})
	}); err != nil {
		return err
	}
	// No Event: the detach's one Event is Detached, once MetalLB has
	// taken the addresses back (clearAssociations).
	log.FromContext(ctx).Info("releasing addresses from MetalLB in one write", "ips", ips, "mode", mode, "grant", class)
	if holds {
		handoffsTotal.WithLabelValues(directionDetach, mode).Inc()
	}
	return nil
}

// heldBeside reports whether one of each address's own placeholders holds
// it beside the Service (HeldBeside).
func (r *Reconciler) heldBeside(ctx context.Context, addrs []*iadv1alpha1.IPAddress) (bool, error) {
	for _, a := range addrs {
		holders, err := r.holdersOf(ctx, a)
		if err != nil {
			return false, err
		}
		if !HeldBeside(a, holders, r.PlaceholderNamespace) {
			return false, nil
		}
	}
	return len(addrs) > 0, nil
}

// handedBack reports whether every one of addrs is handed back (HandedBack).
func (r *Reconciler) handedBack(ctx context.Context, s *scope, addrs []*iadv1alpha1.IPAddress) (bool, error) {
	for _, a := range addrs {
		holders, err := r.holdersOf(ctx, a)
		if err != nil {
			return false, err
		}
		if !HandedBack(a, s.svc, holders, r.PlaceholderNamespace) {
			return false, nil
		}
	}
	return true, nil
}

// holdersOf lists, from the cache, the Services whose ingress shows the
// address's IP.
func (r *Reconciler) holdersOf(ctx context.Context, a *iadv1alpha1.IPAddress) ([]corev1.Service, error) {
	var out []corev1.Service
	for _, ip := range addressIPs([]*iadv1alpha1.IPAddress{a}) {
		var l corev1.ServiceList
		if err := r.List(ctx, &l, client.MatchingFields{index.ServiceByIngressIP: ip}); err != nil {
			return nil, err
		}
		out = append(out, l.Items...)
	}
	return out, nil
}

// withdraw removes, once addrs are detached, the driver's pin, key and
// markers (only where the driver wrote the pin) and the grant label from a
// Service not being deleted.
func (r *Reconciler) withdraw(ctx context.Context, s *scope, addrs []*iadv1alpha1.IPAddress, givingUp bool) error {
	svc := s.svc
	m := marks.Of(svc)
	ours := m.PinnedBy != ""
	if (!ours && len(addrs) == 0) || svc.DeletionTimestamp != nil {
		return nil
	}
	if ours {
		m.Withdraw()
	}
	m.Grant = ""
	if !m.Changed() {
		return nil
	}
	if err := patch.Meta(ctx, r, svc, func() { m.Apply(svc) }); err != nil {
		return err
	}
	log.FromContext(ctx).Info("withdrew the pin and the grant")
	if givingUp && len(addrs) > 0 {
		r.Recorder.Event(svc, corev1.EventTypeNormal, ReasonDetached, msgGivenUp(s.pinClaim(), addressIPs(addrs)))
	}
	return nil
}

// poolsRequireGrant reports whether the pool of every one of addrs'
// classes admits only Services carrying the grant label, as the class
// controller renders every pool. Where the cache shows a pool missing, or
// without the selector (edited by hand, until the class controller renders
// it again), withdrawing the label would not make MetalLB let go: the
// addresses are released with the release pin instead.
func (r *Reconciler) poolsRequireGrant(ctx context.Context, addrs []*iadv1alpha1.IPAddress) (bool, error) {
	for _, a := range addrs {
		pool := &metallbv1beta1.IPAddressPool{}
		err := r.Get(ctx, types.NamespacedName{Namespace: r.MetalLBNamespace, Name: names.PoolName(a.Spec.ClassName)}, pool)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if !marks.RequiresGrant(pool, a.Spec.ClassName) {
			return false, nil
		}
	}
	return len(addrs) > 0, nil
}

// clearAssociations clears status.associatedTo on those of addrs associated
// with the Service, each with the detach's one Event, on the Service (an
// address given up says so on the address too). It reports whether it
// cleared any.
func (r *Reconciler) clearAssociations(ctx context.Context, s *scope, addrs []*iadv1alpha1.IPAddress, givingUp bool) (bool, error) {
	svc := s.svc
	cleared := false
	for _, a := range addrs {
		if !AssociatedWith(a, svc.Namespace, svc.Name) {
			continue
		}
		holders, err := r.holdersOf(ctx, a) // a placeholder beside the Service: the shared handoff
		if err != nil {
			return cleared, err
		}
		s.status.set(a, func(st *iadv1alpha1.IPAddressStatus) { st.AssociatedTo = nil }, func() {
			cleared = true
			log.FromContext(ctx).Info("detached address", "address", a.Name, "ip", a.Spec.Address, "givingUp", givingUp)
			if givingUp {
				r.Recorder.Event(a, corev1.EventTypeNormal, ReasonDetached, msgGivenUpAddress(svc.Namespace, svc.Name))
				return
			}
			r.Recorder.Event(svc, corev1.EventTypeNormal, ReasonDetached,
				msgDetached(a.Spec.Address, a.Name, HeldBeside(a, holders, r.PlaceholderNamespace)))
		})
	}
	// Flushed here, not when the pass ends: the release's next write rests
	// on the associations being cleared (handBack: the hold is re-armed
	// before the release pin; release done: before the pin and markers are
	// withdrawn, or the attach pins the addresses the claim kept). No later
	// phase sets these addresses' status, so this is their one write of
	// the pass.
	err := s.status.flush(ctx, r)
	if apierrors.IsNotFound(err) {
		err = nil // torn down meanwhile: the flush wrote the others
	}
	return cleared, err
}
