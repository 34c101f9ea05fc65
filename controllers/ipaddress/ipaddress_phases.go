package ipaddress

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/binding"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/patch"
)

// conflictSettle is how long after the Conflict condition turned True the
// controller waits before judging that nobody holds the address wrongfully
// any more, so its Service cache can catch up with the holder the Service
// controller saw.
const conflictSettle = 2 * time.Second

// scope carries what one pass fetched and what it changes.
type scope struct {
	// addr is the address; its status is edited in memory by the steps and
	// written once by patchStatus.
	addr *iadv1alpha1.IPAddress
	// orig is the address as read, the base of the status patch.
	orig *iadv1alpha1.IPAddress
	// ip is the parsed address.
	ip netip.Addr
	// class is the address's class, nil when it does not exist.
	class *iadv1alpha1.IPAddressClass

	holders       []corev1.Service
	holdersLoaded bool

	// afterPatch are Events about status changes, recorded once the status
	// patch has succeeded.
	afterPatch []pendingEvent
}

type pendingEvent struct {
	obj                    runtime.Object
	eventType, reason, msg string
}

// rebase makes the address as last written the base of the next status
// patch, once the status was written in the middle of a pass.
func (s *scope) rebase() {
	s.orig = s.addr.DeepCopy()
	s.afterPatch = nil
}

// newScope parses the address. An unparsable spec.address gets a Warning
// Event and no scope: nothing can hold it.
func (r *Reconciler) newScope(_ context.Context, a *iadv1alpha1.IPAddress) (*scope, error) {
	ip, err := names.ParseAddress(a.Spec.Address)
	if err != nil {
		r.Recorder.Event(a, corev1.EventTypeWarning, ReasonInvalidAddress, msgInvalidAddress(a.Spec.Address, err))
		return nil, nil
	}
	return &scope{addr: a, orig: a.DeepCopy(), ip: ip}, nil
}

// class returns the named class from the cache, nil when it does not exist.
func (r *Reconciler) class(ctx context.Context, name string) (*iadv1alpha1.IPAddressClass, error) {
	c := &iadv1alpha1.IPAddressClass{}
	if err := r.Get(ctx, types.NamespacedName{Name: name}, c); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return c, nil
}

// ensureFinalizer adds the driver's teardown finalizer, also to addresses an
// administrator created statically. The optimistic lock matters: a merge
// patch replaces the whole finalizer list.
func (r *Reconciler) ensureFinalizer(ctx context.Context, a *iadv1alpha1.IPAddress) error {
	return patch.AddFinalizer(ctx, r, a, names.Finalizer)
}

// clearStaleAssociation clears status.associatedTo when the Service it names
// no longer exists; the hold step of the same pass then re-arms the hold.
// Only a Service that is gone is stale: a Service whose annotation changed is
// the Service controller's to detach. Workloads of other kinds are not
// checked (this driver only associates Services).
func (r *Reconciler) clearStaleAssociation(ctx context.Context, s *scope) (ctrl.Result, error) {
	w := s.addr.Status.AssociatedTo
	if w == nil || w.Kind != "Service" {
		return ctrl.Result{}, nil
	}
	gone, err := r.serviceGone(ctx, w.Namespace, w.Name)
	if err != nil || !gone {
		return ctrl.Result{}, err
	}
	log.FromContext(ctx).Info("clearing a stale association", "service", index.Key(w.Namespace, w.Name))
	s.afterPatch = append(s.afterPatch, pendingEvent{s.addr, corev1.EventTypeNormal, ReasonAssociationCleared, msgAssociationCleared(w)})
	s.addr.Status.AssociatedTo = nil
	return ctrl.Result{}, nil
}

// serviceGone reports whether a Service does not exist, asking the API
// server when the cache does not have it (the cache may not have seen a
// brand-new Service yet).
func (r *Reconciler) serviceGone(ctx context.Context, namespace, name string) (bool, error) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	err := r.Get(ctx, key, &corev1.Service{})
	if err == nil || !apierrors.IsNotFound(err) {
		return false, err
	}
	err = r.APIReader.Get(ctx, key, &corev1.Service{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, err
}

// detectLost puts the address in phase Lost when MetalLB's configuration
// no longer contains it (its class deleted, the class's pool deleted or
// edited by hand), with the Lost condition and Warning Events on the
// address, its claim and the Service it is attached to; and hands it back
// (Bound while its binding stands, Available otherwise) once the pool
// contains it again. Nothing else changes meanwhile: the hold placeholder
// stays pinned to the address and an attached Service keeps its pin, so
// MetalLB gives the same IP back to them when the range returns.
func (r *Reconciler) detectLost(ctx context.Context, s *scope) (ctrl.Result, error) {
	a := s.addr
	pool, err := r.pool(ctx, a.Spec.ClassName)
	if err != nil {
		return ctrl.Result{}, err
	}
	reason, msg := lostCause(a.Spec.ClassName, s.class, pool, r.MetalLBNamespace, s.ip)
	if reason != "" {
		conditions.Set(&a.Status.Conditions, conditions.Lost, metav1.ConditionTrue, reason, msg, a.Generation)
		if a.Status.Phase == iadv1alpha1.AddressLost {
			// The Warnings follow the status write; a leader that died in
			// between left the phase without them. A new process looks
			// once per address whether they were recorded.
			told, err := r.lostTold(ctx, a)
			if err != nil || told {
				return ctrl.Result{}, err
			}
			log.FromContext(ctx).Info("address lost with no Warning recorded (a previous leader stopped in between); recording it", "reason", reason)
		} else {
			log.FromContext(ctx).Info("address lost: MetalLB's configuration no longer contains it", "reason", reason, "was", a.Status.Phase)
			a.Status.Phase = iadv1alpha1.AddressLost
		}
		s.afterPatch = append(s.afterPatch, pendingEvent{a, corev1.EventTypeWarning, ReasonAddressLost, msg})
		for _, o := range r.related(ctx, a) {
			s.afterPatch = append(s.afterPatch, pendingEvent{o, corev1.EventTypeWarning, ReasonAddressLost, msgAddressLostOn(a, msg)})
		}
		r.lostAnnounced.Store(a.UID, true)
		return ctrl.Result{}, nil
	}
	r.lostAnnounced.Delete(a.UID)
	r.noteClassGone(s, pool)
	if a.Status.Phase != iadv1alpha1.AddressLost {
		return ctrl.Result{}, nil
	}
	b, err := r.binding(ctx, a)
	if err != nil {
		return ctrl.Result{}, err
	}
	phase := handBackPhase(b)
	log.FromContext(ctx).Info("address recovered: the pool contains it again", "phase", phase)
	a.Status.Phase = phase
	msg = msgAddressRecovered(a, r.MetalLBNamespace, phase)
	conditions.Set(&a.Status.Conditions, conditions.Lost, metav1.ConditionFalse, conditions.ReasonRangeReturned, msg, a.Generation)
	s.afterPatch = append(s.afterPatch, pendingEvent{a, corev1.EventTypeNormal, ReasonAddressRecovered, msg})
	for _, o := range r.related(ctx, a) {
		s.afterPatch = append(s.afterPatch, pendingEvent{o, corev1.EventTypeNormal, ReasonAddressRecovered, msg})
	}
	return ctrl.Result{}, nil
}

// noteClassGone sets ClassGone while the address's class is gone and its
// pool is kept for it, with a Normal Event when it starts, and turns it
// False when a class of that name is back. An address that never saw its
// class go gets no condition.
func (r *Reconciler) noteClassGone(s *scope, pool *metallbv1beta1.IPAddressPool) {
	a := s.addr
	gone := s.class == nil || s.class.DeletionTimestamp != nil
	if !gone {
		if conditions.IsTrue(a.Status.Conditions, conditions.ClassGone) {
			conditions.Set(&a.Status.Conditions, conditions.ClassGone, metav1.ConditionFalse, conditions.ReasonClassReturned,
				fmt.Sprintf("IPAddressClass %s exists again and serves the address", a.Spec.ClassName), a.Generation)
		}
		return
	}
	msg := msgClassGone(a, r.MetalLBNamespace, pool)
	if conditions.Set(&a.Status.Conditions, conditions.ClassGone, metav1.ConditionTrue, conditions.ReasonKeptUntilReleased, msg, a.Generation) {
		s.afterPatch = append(s.afterPatch, pendingEvent{a, corev1.EventTypeNormal, conditions.ReasonKeptUntilReleased, msg})
	}
}

// lostTold reports whether the AddressLost Warning of an address already in
// phase Lost was recorded: by this process (remembered), or, the first time
// this process looks, by anyone (its Events, read from the API server). An
// Event that has expired counts as not recorded: the address is still
// Lost, and its owners hear it again.
func (r *Reconciler) lostTold(ctx context.Context, a *iadv1alpha1.IPAddress) (bool, error) {
	if _, ok := r.lostAnnounced.Load(a.UID); ok {
		return true, nil
	}
	var evs corev1.EventList
	if err := r.APIReader.List(ctx, &evs, client.InNamespace(metav1.NamespaceDefault),
		client.MatchingFields{"involvedObject.name": a.Name, "reason": ReasonAddressLost}); err != nil {
		return false, err
	}
	if !hasEventFor(evs.Items, a.UID, ReasonAddressLost) {
		return false, nil
	}
	r.lostAnnounced.Store(a.UID, true)
	return true, nil
}

// hasEventFor reports whether one of evs is about the object with uid and
// has the reason.
func hasEventFor(evs []corev1.Event, uid types.UID, reason string) bool {
	for i := range evs {
		if evs[i].InvolvedObject.UID == uid && evs[i].Reason == reason {
			return true
		}
	}
	return false
}

// pool returns the class's rendered IPAddressPool from the cache, nil when
// it does not exist.
func (r *Reconciler) pool(ctx context.Context, className string) (*metallbv1beta1.IPAddressPool, error) {
	p := &metallbv1beta1.IPAddressPool{}
	err := r.Get(ctx, types.NamespacedName{Namespace: r.MetalLBNamespace, Name: names.PoolName(className)}, p)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// related returns the objects besides the address whose owners hear about
// its loss and recovery: the claim it is bound to (read from the API server;
// omitted when it is gone or another claim of that name) and the Service it
// is attached to (from the cache).
func (r *Reconciler) related(ctx context.Context, a *iadv1alpha1.IPAddress) []runtime.Object {
	var out []runtime.Object
	if ref := a.Spec.ClaimRef; ref != nil {
		c := &iadv1alpha1.IPAddressClaim{}
		err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, c)
		if err == nil && (ref.UID == "" || ref.UID == string(c.UID)) {
			out = append(out, c)
		}
	}
	if w := a.Status.AssociatedTo; w != nil && w.Kind == "Service" {
		svc := &corev1.Service{}
		if err := r.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: w.Name}, svc); err == nil {
			out = append(out, svc)
		}
	}
	return out
}

// recoverConflict hands an address in phase Conflict back once no Service
// outside the placeholder namespace holds it without authority: Bound while
// its binding stands, Available otherwise, with Conflict=False/Resolved.
func (r *Reconciler) recoverConflict(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.addr.Status.Phase != iadv1alpha1.AddressConflict {
		return ctrl.Result{}, nil
	}
	if wait := conflictSettling(s.addr, time.Now()); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	holders, err := r.holders(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	if bad := unauthorizedHolders(s.addr, holders, r.PlaceholderNamespace); len(bad) > 0 {
		return ctrl.Result{}, nil
	}
	b, err := r.binding(ctx, s.addr)
	if err != nil {
		return ctrl.Result{}, err
	}
	phase := handBackPhase(b)
	log.FromContext(ctx).Info("conflict resolved", "phase", phase)
	s.addr.Status.Phase = phase
	msg := msgConflictResolved(phase)
	conditions.Set(&s.addr.Status.Conditions, conditions.Conflict, metav1.ConditionFalse, conditions.ReasonResolved, msg, s.addr.Generation)
	s.afterPatch = append(s.afterPatch, pendingEvent{s.addr, corev1.EventTypeNormal, ReasonConflictResolved, msg})
	return ctrl.Result{}, nil
}

// conflictSettling is how much longer to wait before judging a Conflict
// whose condition turned True recently; 0 when there is no need to wait.
func conflictSettling(a *iadv1alpha1.IPAddress, now time.Time) time.Duration {
	c := meta.FindStatusCondition(a.Status.Conditions, conditions.Conflict)
	if c == nil || c.Status != metav1.ConditionTrue {
		return 0
	}
	if d := c.LastTransitionTime.Add(conflictSettle).Sub(now); d > 0 {
		return d
	}
	return 0
}

// firstReportWindow is how long after an address's creation its first
// status report waits for the core to set the phase.
const firstReportWindow = 10 * time.Second

// firstReportDeferral is how much longer the first status report on a new
// address (orig has no status at all) should wait; 0 to write it now. Right
// after an address is created the core writes it two or three times (its
// finalizer, the claim's uid, the phase, the last one once it has taken the
// address in), and a status patch locked to the version before one of them
// fails and is written again. So a report of conditions only waits until the
// phase is set, or the window has passed for a core that is slow or down.
// A phase the driver sets (Lost, Conflict) is written at once.
func firstReportDeferral(orig, next *iadv1alpha1.IPAddress, now time.Time) time.Duration {
	if orig.Status.Phase != "" || len(orig.Status.Conditions) > 0 || orig.Status.AssociatedTo != nil ||
		next.Status.Phase != "" || orig.DeletionTimestamp != nil {
		return 0
	}
	if d := orig.CreationTimestamp.Add(firstReportWindow).Sub(now); d > 0 {
		return d
	}
	return 0
}

// binding looks up the claim the address's claimRef names, on the API
// server: the hand-back decides between Bound and Available on it, and the
// controller keeps no cache of claims.
func (r *Reconciler) binding(ctx context.Context, a *iadv1alpha1.IPAddress) (claimBinding, error) {
	ref := a.Spec.ClaimRef
	if ref == nil {
		return bindingNone, nil
	}
	c := &iadv1alpha1.IPAddressClaim{}
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, c)
	switch {
	case apierrors.IsNotFound(err):
		return bindingBroken, nil
	case err != nil:
		return bindingNone, err
	case ref.UID == "" || ref.UID == string(c.UID):
		return bindingStands, nil
	default:
		return bindingBroken, nil
	}
}

// enforceHold makes the placeholders match the holding invariant and sets
// the Held condition in memory.
func (r *Reconciler) enforceHold(ctx context.Context, s *scope) (ctrl.Result, error) {
	a, ip := s.addr, s.ip.String()
	phs, err := r.cachedPlaceholders(ctx, a)
	if err != nil {
		return ctrl.Result{}, err
	}
	holders, err := r.holders(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	attached, err := r.attachedService(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	attaching, err := r.attachingService(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	plan := planHold(a, ip, r.PlaceholderNamespace, phs, holders, attached, attaching)

	// Before deleting the placeholders of an attached address for the gap
	// handoff, read the attached Service from the API server: the cache may
	// not show yet the sharing key the Service controller wrote (in the
	// shared handoff, before it recorded the association), and a shared
	// attachment keeps its placeholder.
	if a.Status.AssociatedTo != nil && len(plan.Delete) > 0 && !binding.SharesHold(a, attached) {
		// The address itself may be behind too: a detach clears the
		// association before it withdraws the Service's key, and a cache
		// that saw the withdrawal but not the cleared association would
		// take the detach for a gap handoff and drop the hold.
		cur := &iadv1alpha1.IPAddress{}
		if err := r.APIReader.Get(ctx, types.NamespacedName{Name: a.Name}, cur); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		if cur.ResourceVersion != a.ResourceVersion {
			return ctrl.Result{RequeueAfter: retryAfter}, nil
		}
		w := a.Status.AssociatedTo
		fresh := &corev1.Service{}
		switch err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: w.Name}, fresh); {
		case apierrors.IsNotFound(err):
			// Gone: the next pass clears the association and keeps the hold.
			return ctrl.Result{RequeueAfter: retryAfter}, nil
		case err != nil:
			return ctrl.Result{}, err
		}
		attached = fresh
		plan = planHold(a, ip, r.PlaceholderNamespace, phs, holders, attached, attaching)
	}

	// Before creating a placeholder, or reporting the hold released (the
	// Service controller pins the workload on that signal), make sure the
	// cache did not miss a placeholder.
	if plan.Create || (plan.Held != nil && plan.Held.Reason == conditions.ReasonReleasedForWorkload && !alreadyReleased(a)) {
		live, err := r.livePlaceholders(ctx, a)
		if err != nil {
			return ctrl.Result{}, err
		}
		if len(live) > 0 {
			plan = planHold(a, ip, r.PlaceholderNamespace, live, holders, attached, attaching)
		}
	}
	if plan.Create {
		// Nor a claim's allocation placeholder that holds the address and
		// is about to be handed over (recordingPlaceholder).
		ph, err := r.liveRecording(ctx, s)
		if err != nil {
			return ctrl.Result{}, err
		}
		if ph != nil {
			holders = append(holders, *ph)
			plan = planHold(a, ip, r.PlaceholderNamespace, phs, holders, attached, attaching)
		}
	}

	var res ctrl.Result
	logger := log.FromContext(ctx)
	if plan.Create {
		// Withdraw a Held=False signal before the placeholder exists: the
		// Service controller pins a workload on it. The optimistic lock
		// also stops this pass if the address was associated meanwhile.
		h := plan.Held
		if conditions.Set(&a.Status.Conditions, conditions.Held, h.Status, h.Reason, h.Message, a.Generation) {
			if err := r.writeStatus(ctx, s); err != nil {
				return ctrl.Result{}, err
			}
			s.rebase()
		}
		ph := renderHold(r.PlaceholderNamespace, a, s.ip, plan.Key)
		switch err := r.Create(ctx, ph); {
		case apierrors.IsAlreadyExists(err):
			// Not labelled for this address, or just created: look again soon.
			res = ctrl.Result{RequeueAfter: retryAfter}
		case err != nil:
			return ctrl.Result{}, err
		default:
			logger.Info("created a hold placeholder", "placeholder", client.ObjectKeyFromObject(ph))
			r.Recorder.Event(a, corev1.EventTypeNormal, ReasonHoldCreated, msgHoldCreated(ip, ph.Namespace, ph.Name))
		}
	}
	for _, ph := range plan.Repair {
		msg, repin := msgPinRepaired(ph, ip), !pinnedExactly(ph, ip)
		if err := patch.Unlocked(ctx, r, ph, func() {
			ph.Annotations = repairedAnnotations(ph.Annotations, ip, plan.Key)
			ph.Labels = grantedLabels(ph.Labels, a.Spec.ClassName)
		}); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		if repin {
			logger.Info("re-pinned a placeholder", "placeholder", client.ObjectKeyFromObject(ph))
			r.Recorder.Event(a, corev1.EventTypeNormal, ReasonPinRepaired, msg)
		} else {
			// The key given for a shared handoff about to start, or taken
			// away (a rebinding, or a key an older driver wrote on every
			// placeholder): not worth an Event.
			logger.Info("set the placeholder's sharing key", "placeholder", client.ObjectKeyFromObject(ph), "keyed", plan.Key != "")
		}
	}
	deleted := 0
	for _, ph := range plan.Delete {
		uid := ph.UID
		if err := r.Delete(ctx, ph, client.Preconditions{UID: &uid}); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return ctrl.Result{}, err
		}
		logger.Info("deleted a placeholder", "placeholder", client.ObjectKeyFromObject(ph))
		deleted++
	}
	if w := a.Status.AssociatedTo; w != nil && deleted > 0 && !binding.SharesHold(a, attached) {
		r.Recorder.Event(a, corev1.EventTypeNormal, ReasonHoldReleased, msgHoldReleased(w, deleted))
	}
	g := grantState(a, holders, r.PlaceholderNamespace)
	conditions.Set(&a.Status.Conditions, conditions.Granted, g.Status, g.Reason, g.Message, a.Generation)
	if h := plan.Held; h != nil {
		changed := conditions.Set(&a.Status.Conditions, conditions.Held, h.Status, h.Reason, h.Message, a.Generation)
		if changed && plan.TakenBy != nil {
			s.afterPatch = append(s.afterPatch,
				pendingEvent{a, corev1.EventTypeWarning, ReasonAddressTakenElsewhere, h.Message})
		}
	}
	if !plan.Create && len(plan.Delete) == 0 {
		// A Service a shared handoff is attaching the address to is one of
		// its rightful holders too: MetalLB may refuse it for an allocation
		// it kept from a former holder with the same key and port.
		rightful := attached
		if a.Status.AssociatedTo == nil && binding.SharesHold(a, attaching) {
			rightful = attaching
		}
		again, err := r.clearStaleAllocations(ctx, s, phs, rightful)
		if err != nil {
			return ctrl.Result{}, err
		}
		res = patch.Sooner(res, ctrl.Result{RequeueAfter: again})
	}
	return res, nil
}

// attachedService returns, from the cache, the Service status.associatedTo
// names; nil when there is none or the cache does not have it.
func (r *Reconciler) attachedService(ctx context.Context, s *scope) (*corev1.Service, error) {
	w := s.addr.Status.AssociatedTo
	if w == nil || w.Kind != "Service" {
		return nil, nil
	}
	svc := &corev1.Service{}
	switch err := r.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: w.Name}, svc); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return svc, nil
}

// attachingService is the Service the address's attach grant names
// (names.AnnotationAttaching) while the address is attached to none, from
// the cache; nil when there is none.
func (r *Reconciler) attachingService(ctx context.Context, s *scope) (*corev1.Service, error) {
	ns, name, ok := strings.Cut(s.addr.Annotations[names.AnnotationAttaching], "/")
	if s.addr.Status.AssociatedTo != nil || !ok || ns == "" || name == "" {
		return nil, nil
	}
	svc := &corev1.Service{}
	switch err := r.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, svc); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return svc, nil
}

// alreadyReleased reports whether the address already reports its hold
// released.
func alreadyReleased(a *iadv1alpha1.IPAddress) bool {
	c := meta.FindStatusCondition(a.Status.Conditions, conditions.Held)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == conditions.ReasonReleasedForWorkload
}

// patchStatus writes the status the steps computed, in one merge patch with
// an optimistic lock: it carries only the fields that changed (the
// condition list is replaced as a whole, which the lock makes safe), so it
// never clobbers what another controller wrote since the read. Events about
// the change are recorded once it is written.
//
// The first report on a new address waits for the core to take it in
// (firstReportDeferral): the core's own writes then wake the pass that
// writes it, and it does not race them. The wait is returned.
func (r *Reconciler) patchStatus(ctx context.Context, s *scope) (time.Duration, error) {
	if !equality.Semantic.DeepEqual(s.orig.Status, s.addr.Status) {
		if wait := firstReportDeferral(s.orig, s.addr, time.Now()); wait > 0 {
			return wait, nil
		}
	}
	return 0, r.writeStatus(ctx, s)
}

// writeStatus is patchStatus without the wait, for a write the pass cannot
// go on without.
func (r *Reconciler) writeStatus(ctx context.Context, s *scope) error {
	if !equality.Semantic.DeepEqual(s.orig.Status, s.addr.Status) {
		if err := patch.StatusSince(ctx, r, s.addr, s.orig); err != nil {
			return err
		}
		if s.addr.ResourceVersion != s.orig.ResourceVersion {
			// (A patch the API server found nothing to change in leaves
			// the version as it was: nothing for the cache to show.)
			r.written.Wrote(s.addr.Name, s.orig.ResourceVersion)
		}
	}
	for _, e := range s.afterPatch {
		r.Recorder.Event(e.obj, e.eventType, e.reason, e.msg)
	}
	return nil
}

// holders returns, once per pass, the Services MetalLB assigned the address to.
func (r *Reconciler) holders(ctx context.Context, s *scope) ([]corev1.Service, error) {
	if s.holdersLoaded {
		return s.holders, nil
	}
	var list corev1.ServiceList
	if err := r.List(ctx, &list, client.MatchingFields{index.ServiceByIngressIP: s.ip.String()}); err != nil {
		return nil, err
	}
	s.holders, s.holdersLoaded = list.Items, true
	return s.holders, nil
}

// cachedPlaceholders lists, from the cache, the address's own placeholders
// (ownPlaceholder) among those labelled with its name in the placeholder
// namespace.
func (r *Reconciler) cachedPlaceholders(ctx context.Context, a *iadv1alpha1.IPAddress) ([]corev1.Service, error) {
	var list corev1.ServiceList
	err := r.List(ctx, &list, client.InNamespace(r.PlaceholderNamespace),
		client.MatchingFields{index.PlaceholderByAddress: a.Name})
	return ownPlaceholders(a, list.Items), err
}

// livePlaceholders lists the same from the API server.
func (r *Reconciler) livePlaceholders(ctx context.Context, a *iadv1alpha1.IPAddress) ([]corev1.Service, error) {
	var list corev1.ServiceList
	err := r.APIReader.List(ctx, &list, client.InNamespace(r.PlaceholderNamespace),
		client.MatchingLabels{names.LabelAddress: a.Name})
	return ownPlaceholders(a, list.Items), err
}

// liveRecording reads from the API server the allocation placeholder of
// the claim the address is bound to, and returns it when it holds the
// address and is not handed over yet (recordingPlaceholder).
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
	key := types.NamespacedName{Namespace: r.PlaceholderNamespace, Name: names.AllocationPlaceholderName(types.UID(ref.UID), string(family))}
	if err := r.APIReader.Get(ctx, key, ph); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return recordingPlaceholder(s.addr, s.ip.String(), r.PlaceholderNamespace, []corev1.Service{*ph}), nil
}

// teardown runs the driver's finalizer: delete the address's placeholders
// (which releases MetalLB's allocation), take the address back from every
// Service the driver pinned to it through the release sequence
// (releaseServices), then remove only the driver's finalizer. The finalizer
// stays until no such Service holds the address or carries a release pin
// for it, so an address never leaves the ledger while a Service keeps it.
func (r *Reconciler) teardown(ctx context.Context, a *iadv1alpha1.IPAddress) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(a, names.Finalizer) {
		return ctrl.Result{}, nil
	}
	if pending, err := r.deletePlaceholders(ctx, a); err != nil || pending {
		return ctrl.Result{RequeueAfter: retryAfter}, err
	}
	if ip, err := names.ParseAddress(a.Spec.Address); err == nil {
		pending, err := r.releaseServices(ctx, a, ip.String())
		if err != nil || pending {
			return ctrl.Result{RequeueAfter: retryAfter}, err
		}
	}
	if _, err := patch.RemoveFinalizer(ctx, r, a, names.Finalizer); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	log.FromContext(ctx).Info("teardown done; released the driver's finalizer")
	return ctrl.Result{}, nil
}

// deletePlaceholders deletes, as the API server lists them, the placeholders
// labelled with the address and the hold placeholder owned by it. pending
// is true while one of them is still there (it has finalizers).
func (r *Reconciler) deletePlaceholders(ctx context.Context, a *iadv1alpha1.IPAddress) (pending bool, err error) {
	phs, err := r.livePlaceholders(ctx, a)
	if err != nil {
		return false, err
	}
	hold := &corev1.Service{}
	err = r.APIReader.Get(ctx, types.NamespacedName{Namespace: r.PlaceholderNamespace, Name: names.HoldPlaceholderName(a.Name)}, hold)
	switch {
	case err == nil && hold.Labels[names.LabelAddress] != a.Name && ownedBy(hold, a):
		phs = append(phs, *hold)
	case err != nil && !apierrors.IsNotFound(err):
		return false, err
	}
	for i := range phs {
		ph := &phs[i]
		if len(ph.Finalizers) > 0 || ph.DeletionTimestamp != nil {
			pending = true
		}
		if ph.DeletionTimestamp != nil {
			continue
		}
		uid := ph.UID
		if err := r.Delete(ctx, ph, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		log.FromContext(ctx).Info("teardown: deleted a placeholder", "placeholder", client.ObjectKeyFromObject(ph))
	}
	return pending, nil
}

// ownedBy reports whether a Service carries an owner reference to the address.
func ownedBy(svc *corev1.Service, a *iadv1alpha1.IPAddress) bool {
	for _, o := range svc.OwnerReferences {
		if o.UID == a.UID {
			return true
		}
	}
	return false
}

// releaseServices runs the release sequence (see internal/binding) on each
// Service outside the placeholder namespace that carries the driver's pin
// for the address being torn down: the associated Service, and every
// Service whose pin names the IP or whose ingress shows it, where the
// driver's authorship marker shows the driver wrote the pin. Hand-written
// pins are left alone. Each Service in turn:
//
//   - holds the IP: its pin becomes the release pin and the driver's key
//     goes (one patch, optimistic lock); wait;
//   - carries the release pin: once its ingress is empty, the pin and the
//     markers go; wait until then;
//   - is pinned to the IP without holding it yet (a handoff under way):
//     the IP leaves the pin (the pin and markers go with the last IP).
//
// The Service controller runs the same sequence when it detaches the
// Service, so whichever gets there first, the other finds the step done.
// A Service being deleted needs none of this: its deletion frees the IP.
// pending is true while a Service still has to let go.
func (r *Reconciler) releaseServices(ctx context.Context, a *iadv1alpha1.IPAddress, ip string) (pending bool, err error) {
	svcs, err := r.pinnedServices(ctx, a, ip)
	if err != nil {
		return false, err
	}
	logger := log.FromContext(ctx)
	for i := range svcs {
		svc := &svcs[i]
		step, ann := releaseStep(svc, a, ip)
		switch step {
		case releaseNone:
			continue
		case releaseWait:
			pending = true
			continue
		}
		if err := patch.Meta(ctx, r, svc, func() { svc.Annotations = ann }); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return false, err
		}
		key := client.ObjectKeyFromObject(svc)
		switch step {
		case releasePin:
			pending = true
			logger.Info("teardown: releasing the address from a Service", "service", key)
			r.Recorder.Event(svc, corev1.EventTypeNormal, ReasonReleasing, msgTeardownReleasing(a, ip, ann[names.MetalLBLoadBalancerIPs]))
		case releaseWithdraw:
			logger.Info("teardown: withdrew the driver's pin", "service", key)
			r.Recorder.Event(svc, corev1.EventTypeNormal, ReasonPinWithdrawn, msgPinWithdrawn(a, ip))
		case releaseDropIP:
			logger.Info("teardown: removed the address from a pin", "service", key)
			r.Recorder.Event(svc, corev1.EventTypeNormal, ReasonPinWithdrawn, msgPinWithdrawn(a, ip))
		}
	}
	return pending, nil
}

// pinnedServices returns, from the cache, the Services outside the
// placeholder namespace that may carry the driver's pin for the address:
// those whose pin names ip, those whose ingress shows it, and the
// associated Service.
func (r *Reconciler) pinnedServices(ctx context.Context, a *iadv1alpha1.IPAddress, ip string) ([]corev1.Service, error) {
	seen := map[types.NamespacedName]bool{}
	var out []corev1.Service
	add := func(svcs ...corev1.Service) {
		for _, svc := range svcs {
			key := client.ObjectKeyFromObject(&svc)
			if svc.Namespace == r.PlaceholderNamespace || seen[key] {
				continue
			}
			seen[key] = true
			out = append(out, svc)
		}
	}
	for _, field := range []string{index.ServiceByPinnedIP, index.ServiceByIngressIP} {
		var list corev1.ServiceList
		if err := r.List(ctx, &list, client.MatchingFields{field: ip}); err != nil {
			return nil, err
		}
		add(list.Items...)
	}
	if w := a.Status.AssociatedTo; w != nil && w.Kind == "Service" {
		svc := &corev1.Service{}
		switch err := r.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: w.Name}, svc); {
		case err == nil:
			add(*svc)
		case !apierrors.IsNotFound(err):
			return nil, err
		}
	}
	return out, nil
}
