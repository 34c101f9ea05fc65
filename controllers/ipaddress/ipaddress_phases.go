package ipaddress

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/patch"
	"github.com/cozystack/metallb-iad/internal/phase"
)

// scope carries what one pass fetched and what it changes.
type scope struct {
	// addr is the address; the phases edit its status in memory and
	// reportStatus writes it once, on orig, the address as read.
	addr, orig *iadv1alpha1.IPAddress
	ip         netip.Addr
	// key is the address's sharing key (marks.Keys.Of).
	key string
	// class is nil when it does not exist.
	class *iadv1alpha1.IPAddressClass

	holders       []corev1.Service
	holdersLoaded bool

	// afterPatch are Events about status changes, recorded once the status
	// is written.
	afterPatch []pendingEvent
	// lostTold is set when afterPatch holds the address's AddressLost
	// Warnings: once they are handed to the recorder, the address counts
	// as told (lostAnnounced).
	lostTold bool
}

type pendingEvent struct {
	obj                    runtime.Object
	eventType, reason, msg string
}

// rebase makes the address as written in the middle of a pass the base of
// the next status patch.
func (s *scope) rebase() {
	s.orig = s.addr.DeepCopy()
	s.afterPatch = nil
	s.lostTold = false
}

// newScope parses the address. An unparsable spec.address gets a Warning
// and no scope: nothing can hold it.
func (r *Reconciler) newScope(a *iadv1alpha1.IPAddress, class *iadv1alpha1.IPAddressClass) *scope {
	ip, err := names.ParseAddress(a.Spec.Address)
	if err != nil {
		r.Recorder.Event(a, corev1.EventTypeWarning, ReasonInvalidAddress, msgInvalidAddress(a.Spec.Address, err))
		return nil
	}
	return &scope{addr: a, orig: a.DeepCopy(), ip: ip, key: r.Keys.Of(a), class: class}
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

// ensureFinalizer adds the teardown finalizer, also to addresses created
// statically.
func (r *Reconciler) ensureFinalizer(ctx context.Context, a *iadv1alpha1.IPAddress) error {
	return patch.AddFinalizer(ctx, r, a, names.Finalizer)
}

// clearStaleAssociation clears associatedTo when the Service it names no
// longer exists; enforceHold then re-arms the hold. A Service whose
// annotation changed is the Service controller's to detach.
func (r *Reconciler) clearStaleAssociation(ctx context.Context, s *scope) (phase.Result, error) {
	w := s.addr.Status.AssociatedTo
	if w == nil || w.Kind != "Service" {
		return phase.Next(), nil
	}
	gone, err := r.serviceGone(ctx, w.Namespace, w.Name)
	if err != nil || !gone {
		return phase.Next(), err
	}
	log.FromContext(ctx).Info("clearing a stale association", "service", index.Key(w.Namespace, w.Name))
	s.afterPatch = append(s.afterPatch, pendingEvent{s.addr, corev1.EventTypeNormal, ReasonAssociationCleared, msgAssociationCleared(w)})
	s.addr.Status.AssociatedTo = nil
	return phase.Next(), nil
}

// serviceGone reports whether a Service does not exist, asking the API
// server when the cache does not have it (it may not show a new one yet).
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

// detectLost puts the address in phase Lost while MetalLB's configuration
// does not contain it, with Warnings to its owners, and hands it back once
// the pool contains it again. The hold and the attached Service's pin stay
// meanwhile, so MetalLB gives the same IP back when the range returns.
func (r *Reconciler) detectLost(ctx context.Context, s *scope) (phase.Result, error) {
	a := s.addr
	pool, err := r.pool(ctx, a.Spec.ClassName)
	if err != nil {
		return phase.Next(), err
	}
	reason, msg := lostCause(a.Spec.ClassName, s.class, pool, r.MetalLBNamespace, s.ip)
	if reason != "" {
		return phase.Next(), r.markLost(ctx, s, reason, msg)
	}
	r.lostAnnounced.Delete(a.UID)
	r.noteClassGone(s, pool)
	if a.Status.Phase != iadv1alpha1.AddressLost {
		return phase.Next(), nil
	}
	b, err := r.binding(ctx, a)
	if err != nil {
		return phase.Next(), err
	}
	back := handBackPhase(b)
	log.FromContext(ctx).Info("address recovered: the pool contains it again", "phase", back)
	a.Status.Phase = back
	msg = msgAddressRecovered(a, r.MetalLBNamespace, back)
	conditions.Set(&a.Status.Conditions, conditions.Lost, metav1.ConditionFalse, conditions.ReasonRangeReturned, msg, a.Generation)
	s.afterPatch = append(s.afterPatch, pendingEvent{a, corev1.EventTypeNormal, ReasonAddressRecovered, msg})
	for _, o := range r.related(ctx, a) {
		s.afterPatch = append(s.afterPatch, pendingEvent{o, corev1.EventTypeNormal, ReasonAddressRecovered, msg})
	}
	return phase.Next(), nil
}

// markLost sets the Lost condition and phase, with the AddressLost Warnings
// unless they were recorded already.
func (r *Reconciler) markLost(ctx context.Context, s *scope, reason, msg string) error {
	a := s.addr
	conditions.Set(&a.Status.Conditions, conditions.Lost, metav1.ConditionTrue, reason, msg, a.Generation)
	if a.Status.Phase == iadv1alpha1.AddressLost {
		// The Warnings follow the status write; a leader that died in
		// between left the phase without them.
		told, err := r.lostTold(ctx, a)
		if err != nil || told {
			return err
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
	// Told only once the status write went through and the Warnings were
	// handed to the recorder (writeStatus): a write that failed, or whose
	// answer was lost while it went through, must leave them to be said.
	s.lostTold = true
	return nil
}

// noteClassGone sets ClassGone while the class is gone and its pool kept,
// with a Normal Event when it starts, and turns it False once a class of
// that name is back. An address that never saw its class go gets none.
func (r *Reconciler) noteClassGone(s *scope, pool *metallbv1beta1.IPAddressPool) {
	a := s.addr
	if s.class != nil && s.class.DeletionTimestamp == nil {
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

// lostTold reports whether the AddressLost Warning of an address already
// Lost was recorded: by this process, or, the first time it looks, by
// anyone (read from the API server) since the address went Lost. An
// expired Event, or one about an earlier time it went Lost, counts as not
// recorded: the owners hear it again.
func (r *Reconciler) lostTold(ctx context.Context, a *iadv1alpha1.IPAddress) (bool, error) {
	if _, ok := r.lostAnnounced.Load(a.UID); ok {
		return true, nil
	}
	var evs corev1.EventList
	if err := r.APIReader.List(ctx, &evs, client.InNamespace(metav1.NamespaceDefault),
		client.MatchingFields{"involvedObject.name": a.Name, "reason": ReasonAddressLost}); err != nil {
		return false, err
	}
	var since time.Time
	if c := meta.FindStatusCondition(a.Status.Conditions, conditions.Lost); c != nil {
		since = c.LastTransitionTime.Time
	}
	if !saidSince(evs.Items, a.UID, ReasonAddressLost, since) {
		return false, nil
	}
	r.lostAnnounced.Store(a.UID, true)
	return true, nil
}

// pool returns the class's IPAddressPool from the cache, nil when it does
// not exist.
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

// related returns the objects whose owners hear about the address's loss
// and recovery: its claim (from the API server; omitted when gone or
// another claim of that name) and its attached Service (from the cache).
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
// outside the placeholder namespace holds it without authority.
func (r *Reconciler) recoverConflict(ctx context.Context, s *scope) (phase.Result, error) {
	if s.addr.Status.Phase != iadv1alpha1.AddressConflict {
		return phase.Next(), nil
	}
	if wait := conflictSettling(s.addr, time.Now()); wait > 0 {
		return phase.RetryAfter(wait, "the conflict is settling"), nil
	}
	holders, err := r.holders(ctx, s)
	if err != nil {
		return phase.Next(), err
	}
	if bad := unauthorizedHolders(s.addr, holders, r.PlaceholderNamespace); len(bad) > 0 {
		return phase.Next(), nil
	}
	b, err := r.binding(ctx, s.addr)
	if err != nil {
		return phase.Next(), err
	}
	back := handBackPhase(b)
	log.FromContext(ctx).Info("conflict resolved", "phase", back)
	s.addr.Status.Phase = back
	msg := msgConflictResolved(back)
	conditions.Set(&s.addr.Status.Conditions, conditions.Conflict, metav1.ConditionFalse, conditions.ReasonResolved, msg, s.addr.Generation)
	s.afterPatch = append(s.afterPatch, pendingEvent{s.addr, corev1.EventTypeNormal, ReasonConflictResolved, msg})
	return phase.Next(), nil
}

// binding looks up the claim the claimRef names on the API server: the
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

// attachedService returns, from the cache, the Service associatedTo names;
// nil when there is none or the cache does not have it.
func (r *Reconciler) attachedService(ctx context.Context, s *scope) (*corev1.Service, error) {
	w := s.addr.Status.AssociatedTo
	if w == nil || w.Kind != "Service" {
		return nil, nil
	}
	return r.cachedService(ctx, w.Namespace, w.Name)
}

// attachingService returns, from the cache, the Service the attach grant
// names while the address is attached to none; nil when there is none.
func (r *Reconciler) attachingService(ctx context.Context, s *scope) (*corev1.Service, error) {
	svc, ok := marks.AttachingService(s.addr)
	if s.addr.Status.AssociatedTo != nil || !ok || svc.Namespace == "" || svc.Name == "" {
		return nil, nil
	}
	return r.cachedService(ctx, svc.Namespace, svc.Name)
}

func (r *Reconciler) cachedService(ctx context.Context, namespace, name string) (*corev1.Service, error) {
	svc := &corev1.Service{}
	switch err := r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, svc); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return svc, nil
}

// reportStatus is the last phase: the status patch, then the gauge.
func (r *Reconciler) reportStatus(ctx context.Context, s *scope) (phase.Result, error) {
	wait, err := r.patchStatus(ctx, s)
	if err != nil {
		return phase.Next(), err
	}
	if wait > 0 {
		return phase.RetryAfter(wait, "the first report waits for the core"), nil
	}
	r.states.set(s.addr.Name, s.addr.Spec.ClassName, addressState(s.addr))
	return phase.Next(), nil
}

// patchStatus writes the status the phases computed in one merge patch with
// an optimistic lock, so it never clobbers another controller's write
// since the read; the first report on a new address waits, and the wait is
// returned (firstReportDeferral).
func (r *Reconciler) patchStatus(ctx context.Context, s *scope) (time.Duration, error) {
	if !equality.Semantic.DeepEqual(s.orig.Status, s.addr.Status) {
		if wait := firstReportDeferral(s.orig, s.addr, time.Now()); wait > 0 {
			return wait, nil
		}
	}
	return 0, r.writeStatus(ctx, s)
}

// writeStatus is patchStatus without the wait, then the Events about the
// change.
func (r *Reconciler) writeStatus(ctx context.Context, s *scope) error {
	if !equality.Semantic.DeepEqual(s.orig.Status, s.addr.Status) {
		if err := patch.StatusSince(ctx, r, s.addr, s.orig); err != nil {
			return err
		}
		// A patch that changed nothing leaves the version: nothing to wait for.
		if s.addr.ResourceVersion != s.orig.ResourceVersion {
			r.written.Wrote(s.addr.Name, s.orig.ResourceVersion)
		}
	}
	for _, e := range s.afterPatch {
		r.Recorder.Event(e.obj, e.eventType, e.reason, e.msg)
	}
	if s.lostTold {
		r.lostAnnounced.Store(s.addr.UID, true)
	}
	return nil
}

// holders returns, once per pass, the Services MetalLB assigned the address.
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

// cachedPlaceholders lists the address's own placeholders from the cache.
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
	key := types.NamespacedName{Namespace: r.PlaceholderNamespace, Name: names.AllocationPlaceholderName(types.UID(ref.UID), string(family))}
	if err := r.APIReader.Get(ctx, key, ph); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return recordingPlaceholder(s.addr, s.ip.String(), r.PlaceholderNamespace, []corev1.Service{*ph}), nil
}
