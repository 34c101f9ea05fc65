package ipaddress

import (
	"context"
	"time"

	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/ipaddress/hold"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/phase"
)

// detectLost puts the address in phase Lost while MetalLB's configuration
// does not contain it, with Warnings to its owners, and hands it back once
// the pool contains it again. The hold and the attached Service's pin stay
// meanwhile, so MetalLB gives the same IP back when the range returns.
func (r *Reconciler) detectLost(ctx context.Context, s *scope) (phase.Result, error) {
	a := s.Addr
	pool, err := r.pool(ctx, a.Spec.ClassName)
	if err != nil {
		return phase.Next(), err
	}
	s.Pool = pool
	reason, msg := lostCause(a.Spec.ClassName, s.class, pool, r.MetalLBNamespace, s.IP)
	if reason != "" {
		if err := r.markLost(ctx, s, reason, msg); err != nil {
			return phase.Next(), err
		}
		return phase.WaitFor("the class's pool to contain the address again", 0), nil
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
	s.AfterPatch = append(s.AfterPatch, hold.Event{Object: a, Type: corev1.EventTypeNormal, Reason: ReasonAddressRecovered, Message: msg})
	for _, o := range r.related(ctx, a) {
		s.AfterPatch = append(s.AfterPatch, hold.Event{Object: o, Type: corev1.EventTypeNormal, Reason: ReasonAddressRecovered, Message: msg})
	}
	return phase.Next(), nil
}

// markLost sets the Lost condition and phase, with the AddressLost Warnings
// unless they were recorded already.
func (r *Reconciler) markLost(ctx context.Context, s *scope, reason, msg string) error {
	a := s.Addr
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
	s.AfterPatch = append(s.AfterPatch, hold.Event{Object: a, Type: corev1.EventTypeWarning, Reason: ReasonAddressLost, Message: msg})
	for _, o := range r.related(ctx, a) {
		s.AfterPatch = append(s.AfterPatch, hold.Event{Object: o, Type: corev1.EventTypeWarning, Reason: ReasonAddressLost, Message: msgAddressLostOn(a, msg)})
	}
	// Told only once the status write went through and the Warnings were
	// handed to the recorder (patchStatus): a write that failed, or whose
	// answer was lost while it went through, must leave them to be said.
	s.lostTold = true
	return nil
}

// noteClassGone sets ClassGone while the class is gone and its pool kept,
// with a Normal Event when it starts, and turns it False once a class of
// that name is back. An address that never saw its class go gets none.
func (r *Reconciler) noteClassGone(s *scope, pool *metallbv1beta1.IPAddressPool) {
	a := s.Addr
	if s.class != nil && s.class.DeletionTimestamp == nil {
		if conditions.IsTrue(a.Status.Conditions, conditions.ClassGone) {
			conditions.Set(&a.Status.Conditions, conditions.ClassGone, metav1.ConditionFalse, conditions.ReasonClassReturned,
				msgClassReturned(a.Spec.ClassName), a.Generation)
		}
		return
	}
	msg := msgClassGone(a, r.MetalLBNamespace, pool)
	if conditions.Set(&a.Status.Conditions, conditions.ClassGone, metav1.ConditionTrue, conditions.ReasonKeptUntilReleased, msg, a.Generation) {
		s.AfterPatch = append(s.AfterPatch, hold.Event{Object: a, Type: corev1.EventTypeNormal, Reason: conditions.ReasonKeptUntilReleased, Message: msg})
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
