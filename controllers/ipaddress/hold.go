package ipaddress

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/parking"
	"github.com/cozystack/metallb-iad/internal/patch"
	"github.com/cozystack/metallb-iad/internal/phase"
	"github.com/cozystack/metallb-iad/internal/placeholder"
)

// holdView is what the hold is planned on, and the plan.
type holdView struct {
	// cached are the address's placeholders as the cache shows them;
	// placeholders are the plan's: the API server's when it shows some the
	// cache missed.
	cached, placeholders []corev1.Service
	holders              []corev1.Service
	attached, attaching  *corev1.Service
	park                 parkOpt
	plan                 holdPlan
}

func (v *holdView) replan(s *scope, placeholderNamespace string) {
	v.plan = planHold(s.addr, s.ip.String(), s.key, s.keyBefore, placeholderNamespace, v.park, v.placeholders, v.holders, v.attached, v.attaching)
}

// enforceHold makes the placeholders match the holding invariant and sets
// the Held and Granted conditions in memory.
func (r *Reconciler) enforceHold(ctx context.Context, s *scope) (phase.Result, error) {
	v, res, err := r.observeHold(ctx, s)
	if v == nil || err != nil {
		return res, err
	}
	return r.applyHold(ctx, s, v)
}

// observeHold reads from the cache, plans, and reads again from the API
// server where the plan would act on what the cache may not show yet. No
// view, with the step's result, means the pass must not act on the hold.
func (r *Reconciler) observeHold(ctx context.Context, s *scope) (*holdView, phase.Result, error) {
	a := s.addr
	v := &holdView{}
	var err error
	if v.cached, err = r.cachedPlaceholders(ctx, a); err != nil {
		return nil, phase.Next(), err
	}
	v.placeholders = v.cached
	if v.holders, err = r.holders(ctx, s); err != nil {
		return nil, phase.Next(), err
	}
	if v.attached, err = r.attachedService(ctx, s); err != nil {
		return nil, phase.Next(), err
	}
	if v.attaching, err = r.attachingService(ctx, s); err != nil {
		return nil, phase.Next(), err
	}
	pool, err := parking.Get(ctx, r, r.MetalLBNamespace, r.ParkingPool)
	if err != nil {
		return nil, phase.Next(), err
	}
	v.park = parkOpt{Pool: r.ParkingPool, Open: parking.Serves(pool, s.ip), GrantOnly: marks.RequiresGrant(s.pool, a.Spec.ClassName)}
	current := s.key
	s.key = pairKey(a, current, s.ip.String(), v.attached, v.holders, v.placeholders)
	v.replan(s, r.PlaceholderNamespace)
	if recheckAttached(a, s.key, v.plan, v.attached) {
		fresh, res, err := r.freshAttached(ctx, a)
		if fresh == nil {
			return nil, res, err
		}
		v.attached = fresh
		s.key = pairKey(a, current, s.ip.String(), v.attached, v.holders, v.placeholders)
		v.replan(s, r.PlaceholderNamespace)
	}
	if recheckPlaceholders(a, v.plan) {
		live, err := r.livePlaceholders(ctx, a)
		if err != nil {
			return nil, phase.Next(), err
		}
		if len(live) > 0 {
			v.placeholders = live
			v.replan(s, r.PlaceholderNamespace)
		}
	}
	if v.plan.Create {
		// Nor a claim's allocation placeholder about to be handed over.
		ph, err := r.liveRecording(ctx, s)
		if err != nil {
			return nil, phase.Next(), err
		}
		if ph != nil {
			v.holders = append(v.holders, *ph)
			v.replan(s, r.PlaceholderNamespace)
		}
	}
	return v, phase.Next(), nil
}

// freshAttached reads the address and then its attached Service from the
// API server (recheckAttached); nil, with the step's result, when the cache
// is behind the address or the Service is gone.
func (r *Reconciler) freshAttached(ctx context.Context, a *iadv1alpha1.IPAddress) (*corev1.Service, phase.Result, error) {
	cur := &iadv1alpha1.IPAddress{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Name: a.Name}, cur); err != nil {
		return nil, phase.WaitFor("the address is gone", 0), client.IgnoreNotFound(err)
	}
	if cur.ResourceVersion != a.ResourceVersion {
		return nil, phase.WaitFor("the cache to show the address's last write", lookAgain), nil
	}
	w := a.Status.AssociatedTo
	fresh := &corev1.Service{}
	switch err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: w.Name}, fresh); {
	case apierrors.IsNotFound(err):
		// The next pass clears the association and keeps the hold.
		return nil, phase.WaitFor("the cache to show the attached Service gone", lookAgain), nil
	case err != nil:
		return nil, phase.Next(), err
	}
	return fresh, phase.Next(), nil
}

// applyHold writes what the plan asks for: the new placeholder, repairs,
// deletions, then the conditions and Events; with nothing to create or
// delete, it clears a stale allocation that keeps the rightful holder out.
func (r *Reconciler) applyHold(ctx context.Context, s *scope, v *holdView) (phase.Result, error) {
	res := phase.Next()
	if v.plan.Create {
		var err error
		if res, err = r.createHold(ctx, s, v.plan); err != nil {
			return phase.Next(), err
		}
	}
	if gone, err := r.repairPlaceholders(ctx, s, v.plan); err != nil || gone {
		return phase.WaitFor("a placeholder to repair is gone", 0), err
	}
	deleted, err := r.dropPlaceholders(ctx, v.plan.Delete)
	if err != nil {
		return phase.Next(), err
	}
	if _, err := r.parkPlaceholders(ctx, v.plan.Park); err != nil {
		return phase.Next(), err
	}
	r.noteHold(s, v, deleted)
	if v.plan.Create || len(v.plan.Delete) > 0 || len(v.plan.Park) > 0 {
		if res.State != phase.Done {
			return res, nil
		}
		return phase.WaitFor(holdWait(v.plan), 0), nil
	}
	again, err := r.clearStaleAllocations(ctx, s, v.cached, rightfulHolder(s.addr, s.key, v.attached, v.attaching))
	switch {
	case err != nil:
		return phase.Next(), err
	case again > 0:
		return phase.RetryAfter(again, "a stale allocation may keep the rightful holder out"), nil
	case holdWait(v.plan) != "":
		return phase.WaitFor(holdWait(v.plan), 0), nil
	}
	return phase.Next(), nil
}

// createHold creates the hold placeholder. A Held=False signal is withdrawn
// first, since the Service controller pins a workload on it; the status
// write's lock also stops the pass if the address was associated meanwhile.
func (r *Reconciler) createHold(ctx context.Context, s *scope, plan holdPlan) (phase.Result, error) {
	a, h := s.addr, plan.Held
	if conditions.Set(&a.Status.Conditions, conditions.Held, h.Status, h.Reason, h.Message, a.Generation) {
		if err := r.writeStatus(ctx, s); err != nil {
			return phase.Next(), err
		}
		s.rebase()
	}
	ph := renderHold(r.PlaceholderNamespace, a, s.ip, plan.Key)
	switch err := r.Create(ctx, ph); {
	case apierrors.IsAlreadyExists(err):
		// Not labelled for this address, or just created.
		return phase.WaitFor("the cache to show the hold placeholder, whose name is taken", lookAgain), nil
	case err != nil:
		return phase.Next(), err
	}
	log.FromContext(ctx).Info("created a hold placeholder", "placeholder", client.ObjectKeyFromObject(ph))
	r.Recorder.Event(a, corev1.EventTypeNormal, ReasonHoldCreated, msgHoldCreated(s.ip.String(), ph.Namespace, ph.Name))
	return phase.Next(), nil
}

// repairPlaceholders re-pins, re-keys and grants the plan's placeholders;
// gone stops at one that no longer exists.
func (r *Reconciler) repairPlaceholders(ctx context.Context, s *scope, plan holdPlan) (gone bool, err error) {
	a, ip := s.addr, s.ip.String()
	logger := log.FromContext(ctx)
	for _, ph := range plan.Repair {
		repin, unpark, pool := !marks.Of(ph).PinnedExactly(ip), marks.Of(ph).Parked(r.ParkingPool), ""
		if unpark {
			pool = names.PoolName(a.Spec.ClassName)
		}
		if err := patch.Unlocked(ctx, r, ph, func() {
			marks.Edit(ph, func(m *marks.Marks) {
				m.Hold(ip, plan.Key, pool)
				m.Grant = a.Spec.ClassName
			})
		}); err != nil {
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		}
		switch {
		case unpark:
			// The parked handoff's return: the detach's one Event is the
			// Service's, and Held says the rest.
			logger.Info("brought a parked placeholder back", "placeholder", client.ObjectKeyFromObject(ph), "ip", ip)
		case repin:
			logger.Info("re-pinned a placeholder", "placeholder", client.ObjectKeyFromObject(ph))
			r.Recorder.Event(a, corev1.EventTypeNormal, ReasonPinRepaired, msgPinRepaired(ph, ip))
		default:
			// A key given or taken away is not worth an Event.
			logger.Info("set the placeholder's sharing key", "placeholder", client.ObjectKeyFromObject(ph), "keyed", plan.Key != "")
		}
	}
	return false, nil
}

// dropPlaceholders deletes the placeholders it is given, each by uid, and
// counts those it deleted.
func (r *Reconciler) dropPlaceholders(ctx context.Context, phs []*corev1.Service) (int, error) {
	deleted := 0
	for _, ph := range phs {
		ok, err := patch.Delete(ctx, r, ph, false)
		if err != nil {
			return deleted, err
		}
		if ok {
			log.FromContext(ctx).Info("deleted a placeholder", "placeholder", client.ObjectKeyFromObject(ph))
			deleted++
		}
	}
	return deleted, nil
}

// parkPlaceholders moves the placeholders it is given to the parking
// pool, each with an optimistic lock, and counts those it moved.
func (r *Reconciler) parkPlaceholders(ctx context.Context, phs []*corev1.Service) (int, error) {
	parked := 0
	for _, ph := range phs {
		err := patch.Meta(ctx, r, ph, func() { marks.Edit(ph, func(m *marks.Marks) { m.Park(r.ParkingPool) }) })
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return parked, err
		}
		log.FromContext(ctx).Info("parked a placeholder", "placeholder", client.ObjectKeyFromObject(ph), "pool", r.ParkingPool)
		parked++
	}
	return parked, nil
}

// noteHold records HoldReleased (a parked hold says so in Held alone: one
// Event a handoff, the Service's) and sets Granted and Held in
// memory, with the AddressTakenElsewhere Warning after the status patch.
func (r *Reconciler) noteHold(s *scope, v *holdView, deleted int) {
	a := s.addr
	if w := releasedFor(a, s.key, v.attached, deleted); w != nil {
		r.Recorder.Event(a, corev1.EventTypeNormal, ReasonHoldReleased, msgHoldReleased(w, deleted))
	}
	g := grantState(a, v.holders, r.PlaceholderNamespace)
	conditions.Set(&a.Status.Conditions, conditions.Granted, g.Status, g.Reason, g.Message, a.Generation)
	if h := v.plan.Held; h != nil &&
		conditions.Set(&a.Status.Conditions, conditions.Held, h.Status, h.Reason, h.Message, a.Generation) && v.plan.TakenBy != nil {
		s.afterPatch = append(s.afterPatch, pendingEvent{a, corev1.EventTypeWarning, ReasonAddressTakenElsewhere, h.Message})
	}
}

// liveRecording reads from the API server the allocation placeholder of
// the address's claim, returned while it holds the address and is not
// handed over yet (recordingPlaceholder).
func (r *Reconciler) liveRecording(ctx context.Context, s *scope) (*corev1.Service, error) {
	ref := s.addr.Spec.ClaimRef
	if ref == nil || ref.UID == "" {
		return nil, nil
	}
	family := iadv1alpha1.FamilyIPv4
	if s.ip.Is6() {
		family = iadv1alpha1.FamilyIPv6
	}
	ph := &corev1.Service{}
	key := types.NamespacedName{Namespace: r.PlaceholderNamespace, Name: placeholder.AllocationName(types.UID(ref.UID), string(family))}
	if err := r.APIReader.Get(ctx, key, ph); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return recordingPlaceholder(s.addr, s.ip.String(), r.PlaceholderNamespace, []corev1.Service{*ph}), nil
}
