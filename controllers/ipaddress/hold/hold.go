// Package hold keeps an IPAddress's address held on MetalLB while no
// workload uses it, and hands it over when one does: the ipaddress
// controller's hold phases (EnforceHold, ClearStale, CreateHold), which
// observe the Services around the address, plan on them (hold_plan.go and
// the plans beside it) and apply the plan, over the controller's scope
// (Scope).
package hold

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/parking"
	"github.com/cozystack/metallb-iad/internal/patch"
	"github.com/cozystack/metallb-iad/internal/phase"
	"github.com/cozystack/metallb-iad/internal/stale"
)

// Keeper keeps the addresses held: the ipaddress controller's dependencies,
// which it embeds, and the count of the Services holding an address.
type Keeper struct {
	bootstrap.Deps
	// Allocated counts the Services holding a load-balancer address, the
	// size of a MetalLB full pass (stale.PassTime).
	Allocated stale.Allocated
}

// LookAgain is the fallback look of a pass that waits for the cache or the
// API server to move on; the watches usually bring the address back first.
const LookAgain = time.Second

// EnforceHold keeps the holding invariant on the address: it observes the
// Services around it in the cache, plans (planHold), confirms with the API
// server what the plan asks, and applies the plan's repairs, deletions and
// parkings, with Held and Granted set in memory. Two steps of the plan
// have phases of their own: the new hold placeholder is created after the
// status write (CreateHold), and a stale MetalLB allocation is cleared
// once the hold has nothing left to write (ClearStale).
func (k *Keeper) EnforceHold(ctx context.Context, s *Scope) (phase.Result, error) {
	v, err := k.observeHold(ctx, s)
	if err != nil {
		return phase.Next(), err
	}
	p := planHold(v)
	s.Key = p.Pair
	if p, err = k.confirmHold(ctx, v, p); err != nil || p.Confirm != 0 {
		return phase.WaitFor(confirmWait(p.Confirm), LookAgain), err
	}
	s.Key = p.Pair
	gone, err := k.repairPlaceholders(ctx, v, p)
	if err != nil || gone {
		return phase.WaitFor("a placeholder to repair is gone", 0), err
	}
	deleted, err := k.dropPlaceholders(ctx, p.Delete)
	if err != nil {
		return phase.Next(), err
	}
	if err := k.parkPlaceholders(ctx, p.Park); err != nil {
		return phase.Next(), err
	}
	k.noteHold(s, v, p, deleted)
	s.held = &heldPlan{view: v, plan: p}
	if w := holdWait(p); w != "" {
		return phase.WaitFor(w, 0), nil
	}
	return phase.Next(), nil
}

// observeHold reads from the cache what the hold is planned on.
func (k *Keeper) observeHold(ctx context.Context, s *Scope) (*holdView, error) {
	v := &holdView{addr: s.Addr, ip: s.IP.String(), key: s.Key, before: s.KeyBefore, placeholderNamespace: k.PlaceholderNamespace}
	var err error
	if v.cached, err = k.CachedPlaceholders(ctx, s.Addr); err != nil {
		return nil, err
	}
	v.placeholders = v.cached
	if v.holders, err = k.Holders(ctx, s); err != nil {
		return nil, err
	}
	if v.attached, err = k.AttachedService(ctx, s); err != nil {
		return nil, err
	}
	if v.attaching, err = k.attachingService(ctx, s); err != nil {
		return nil, err
	}
	pool, err := parking.Get(ctx, k, k.MetalLBNamespace, k.ParkingPool)
	if err != nil {
		return nil, err
	}
	v.park = parkOpt{Pool: k.ParkingPool, Open: parking.Serves(pool, s.IP), GrantOnly: marks.RequiresGrant(s.Pool, s.Addr.Spec.ClassName)}
	return v, nil
}

// confirmHold makes the reads the plan asks for (holdPlan.Confirm), in
// order, and plans again on what each shows. The plan it returns asks for
// nothing more, unless one read ends the pass: then it keeps that one.
func (k *Keeper) confirmHold(ctx context.Context, v *holdView, p holdPlan) (holdPlan, error) {
	if p.Confirm&confirmAttached != 0 {
		fresh, err := k.freshAttached(ctx, v.addr)
		if fresh == nil || err != nil {
			return holdPlan{Confirm: confirmAttached}, err
		}
		v.attached = fresh
		p = planHold(v)
	}
	if p.Confirm&confirmPlaceholders != 0 {
		live, err := k.LivePlaceholders(ctx, v.addr)
		if err != nil {
			return p, err
		}
		if len(live) > 0 {
			v.placeholders = live
			p = planHold(v)
		}
	}
	if p.Confirm&confirmRecording != 0 && p.Create {
		ph, err := k.liveRecording(ctx, v)
		if err != nil {
			return p, err
		}
		if ph != nil {
			v.holders = append(v.holders, *ph)
			p = planHold(v)
		}
	}
	p.Confirm = 0
	return p, nil
}

// confirmWait is, for the log, why a confirmation ended the pass.
func confirmWait(c confirmation) string {
	if c&confirmAttached != 0 {
		return "the cache to show the address and its attached Service as the API server does"
	}
	return "the hold's reads from the API server"
}

// freshAttached reads the address and then its attached Service from the
// API server (confirmAttached); nil when the address is gone, the cache is
// behind it, or the Service is gone (the next pass clears the association
// and keeps the hold).
func (k *Keeper) freshAttached(ctx context.Context, a *iadv1alpha1.IPAddress) (*corev1.Service, error) {
	cur := &iadv1alpha1.IPAddress{}
	if err := k.APIReader.Get(ctx, types.NamespacedName{Name: a.Name}, cur); err != nil || cur.ResourceVersion != a.ResourceVersion {
		return nil, client.IgnoreNotFound(err)
	}
	w := a.Status.AssociatedTo
	fresh := &corev1.Service{}
	if err := k.APIReader.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: w.Name}, fresh); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return fresh, nil
}

// repairPlaceholders re-pins, re-keys and grants the plan's placeholders;
// gone stops at one that no longer exists.
func (k *Keeper) repairPlaceholders(ctx context.Context, v *holdView, p holdPlan) (gone bool, err error) {
	a, ip := v.addr, v.ip
	logger := log.FromContext(ctx)
	for _, ph := range p.Repair {
		repin, unpark, pool := !marks.Of(ph).PinnedExactly(ip), marks.Of(ph).Parked(k.ParkingPool), ""
		if unpark {
			pool = names.PoolName(a.Spec.ClassName)
		}
		if err := patch.Unlocked(ctx, k, ph, func() {
			marks.Edit(ph, func(m *marks.Marks) {
				m.Hold(ip, p.Key, pool)
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
			k.Recorder.Event(a, corev1.EventTypeNormal, ReasonPinRepaired, msgPinRepaired(ph, ip))
		default:
			// A key given or taken away is not worth an Event.
			logger.Info("set the placeholder's sharing key", "placeholder", client.ObjectKeyFromObject(ph), "keyed", p.Key != "")
		}
	}
	return false, nil
}

// dropPlaceholders deletes the placeholders it is given, each by uid, and
// counts those it deleted.
func (k *Keeper) dropPlaceholders(ctx context.Context, phs []*corev1.Service) (int, error) {
	deleted := 0
	for _, ph := range phs {
		ok, err := patch.Delete(ctx, k, ph, false)
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

// CreateHold creates the hold placeholder the plan asks for. It runs after
// the status write: Held no longer says False (the Service controller pins
// a workload on it), and the write's lock has ended the pass if the
// address was associated meanwhile.
func (k *Keeper) CreateHold(ctx context.Context, s *Scope) (phase.Result, error) {
	if !s.CreatesHold() {
		return phase.Next(), nil
	}
	ph := renderHold(k.PlaceholderNamespace, s.Addr, s.IP, s.held.plan.Key)
	switch err := k.Create(ctx, ph); {
	case apierrors.IsAlreadyExists(err):
		// Not labelled for this address, or just created.
		return phase.WaitFor("the cache to show the hold placeholder, whose name is taken", LookAgain), nil
	case err != nil:
		return phase.Next(), err
	}
	log.FromContext(ctx).Info("created a hold placeholder", "placeholder", client.ObjectKeyFromObject(ph))
	k.Recorder.Event(s.Addr, corev1.EventTypeNormal, ReasonHoldCreated, msgHoldCreated(s.IP.String(), ph.Namespace, ph.Name))
	return phase.Next(), nil
}

// ClearStale is the stale-allocation pass: once the hold has nothing left
// to create, delete or park, it has the stale allocations that keep the
// address from its rightful holder (stale.Blocked) cleared
// (stale.Unblocker), and looks again when MetalLB has had time to answer.
// With no one blocked, it drops the retry marks of the holders that got
// the address.
func (k *Keeper) ClearStale(ctx context.Context, s *Scope) (phase.Result, error) {
	if s.held == nil || s.held.plan.writes() {
		return phase.Next(), nil
	}
	v := s.held.view
	a, ip, attached := s.Addr, v.ip, rightfulHolder(v, s.Key)
	blocked := stale.Blocked(a, ip, s.Key, v.cached, v.holders, attached)
	if blocked == nil {
		svcs := []*corev1.Service{attached}
		for i := range v.cached {
			svcs = append(svcs, &v.cached[i])
		}
		return phase.Next(), stale.DropRetryMarks(ctx, k, ip, svcs...)
	}
	u := &stale.Unblocker{Deps: k.Deps, Allocated: &k.Allocated}
	again, err := u.Unblock(ctx, blocked, ip, func(key types.NamespacedName) error {
		return k.clearStaleAllocation(ctx, a, ip, key)
	})
	if err != nil || again == 0 {
		return phase.Next(), err
	}
	return phase.RetryAfter(again, "a stale allocation may keep the rightful holder out"), nil
}

// clearStaleAllocation clears MetalLB's allocation for the name key
// (stale.Clear) and tells the address.
func (k *Keeper) clearStaleAllocation(ctx context.Context, a *iadv1alpha1.IPAddress, ip string, key types.NamespacedName) error {
	cleared, err := stale.Clear(ctx, k, k.APIReader, key, a.Name)
	if err != nil || !cleared {
		return err
	}
	log.FromContext(ctx).Info("cleared a stale MetalLB allocation", "service", key, "ip", ip)
	k.Recorder.Event(a, corev1.EventTypeNormal, ReasonStaleAllocationCleared, msgStaleAllocationCleared(ip, key))
	return nil
}
