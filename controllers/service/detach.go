package service

import (
	"context"
	"maps"
	"slices"

	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/binding"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/patch"
)

// Detaching reverses the handoff for some addresses (the addresses the
// Service holds or is associated with that it should not be). Each step
// re-converges after a crash. While the driver's pin is on the Service and
// it is not being deleted:
//
//   - shared handoff, when the Service holds the addresses and carries the
//     driver's sharing key (it can share them with placeholders), and the
//     addresses are kept (not given up): clear status.associatedTo first
//     and wait until each address is handed back (HandedBack). In a
//     shared attachment the hold placeholder kept holding each address
//     beside the Service, so they are handed back at once; where it did
//     not (an attachment an older driver made), the IPAddress controller
//     re-arms the hold and the new placeholder shares the address with the
//     Service first;
//   - then, in both modes, the release sequence (binding.ReleaseAnnotations):
//     replace the pin with the release pin and withdraw the sharing key, so
//     MetalLB takes the addresses back, and wait until the Service's
//     ingress no longer shows them. The pinned-by marker keeps the Service
//     authorized meanwhile.
//
// A detach of everything the Service holds, from class pools that admit
// only Services carrying the grant label, of a Service that no longer asks
// for the claim, writes the Service once instead (binding.LetGo). In the
// gap handoff, or in a shared one where a placeholder already holds each
// address beside the Service, the pin, the key, the markers and the grant
// label go in one patch while the addresses stay associated with the
// Service, which keeps it authorized until MetalLB has taken them back;
// then the associations are cleared. MetalLB sees one change of the
// Service, and no second write races the full pass its release starts.
//
// Addresses are given up when one of them is being deleted or the claim
// the pin is for is gone or being deleted: no hold comes back for them, so
// the release runs at once, and the Events say so. The IPAddress
// controller runs the same release sequence when it tears an address down,
// so whichever of the two gets there first, the Service is left with no
// address that left the ledger and no release pin.
//
// A Service being deleted skips this: its deletion frees the addresses.
// Then status.associatedTo is cleared on addrs (in the gap handoff this
// re-arms the hold). Every annotation patch carries an optimistic lock. It
// reports whether it finished.
//
// detachStale detaches the addresses the Service holds or is associated
// with but should not be (the claim lost them); the Service keeps its pin
// for the others.
func (r *Reconciler) detachStale(ctx context.Context, s *scope, stale []*iadv1alpha1.IPAddress) (bool, error) {
	return r.release(ctx, s, stale, false)
}

// detachAll detaches every address the Service is associated with or
// pinned for (nothing stays associated), then withdraws the driver's pin,
// key and markers (never a pin or key without its marker) and the grant
// label.
func (r *Reconciler) detachAll(ctx context.Context, s *scope) (bool, error) {
	addrs := slices.Clone(s.mine)
	for _, a := range s.pinnedFor {
		if !containsAddress(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	givingUp := s.givingUp(addrs) // as the addresses were before the release
	if done, err := r.release(ctx, s, addrs, true); err != nil || !done {
		return done, err
	}
	return true, r.withdraw(ctx, s, addrs, givingUp)
}

// release runs, for addrs, the handoff back and the release sequence
// described at detachStale, then clears their associations. all says addrs
// are everything the Service holds or is pinned for, so the Service may be
// let go in one write. It reports whether it finished.
func (r *Reconciler) release(ctx context.Context, s *scope, addrs []*iadv1alpha1.IPAddress, all bool) (bool, error) {
	svc := s.svc
	_, ours := svc.Annotations[names.AnnotationPinnedBy]
	deleting := svc.DeletionTimestamp != nil
	ips := addressIPs(addrs)
	givingUp := s.givingUp(addrs)

	if ours && !deleting && len(addrs) > 0 {
		// An address being given up is released with the release pin, as
		// the IPAddress controller's teardown does, so the two agree;
		// otherwise a pool that requires the grant lets the Service go by
		// withdrawing the grant label.
		release := binding.ReleasePinValue(svc)
		byGrant := false
		if !givingUp {
			var err error
			if byGrant, err = r.poolsRequireGrant(ctx, addrs); err != nil {
				return false, err
			}
			if byGrant {
				release = ""
			}
		}
		if !ReleaseStarted(svc, release) {
			mode := DetachMode(svc, ips, SharingKeyOf(addrs), givingUp)
			if all && byGrant && !asksFor(svc, addrs) {
				oneWrite := mode == ModeGap
				if !oneWrite {
					var err error
					if oneWrite, err = r.heldBeside(ctx, addrs); err != nil {
						return false, err
					}
				}
				if oneWrite {
					return false, r.letGo(ctx, s, ips, mode)
				}
			}
			if mode == ModeShared {
				cleared, err := r.clearAssociations(ctx, s, addrs, false)
				if err != nil {
					return false, err
				}
				// In a shared attachment the placeholder held the
				// addresses throughout: they are handed back at once.
				back, err := r.handedBack(ctx, s, addrs)
				if err != nil {
					return false, err
				}
				if cleared && !back {
					r.Recorder.Event(svc, corev1.EventTypeNormal, ReasonHandingBack, msgHandingBack(ips))
				}
				if !back {
					return false, nil // the address and placeholder watches bring the Service back
				}
			}
			holds := binding.Holds(svc, ips...)
			if err := patch.Meta(ctx, r, svc, func() {
				svc.Annotations = binding.ReleaseAnnotations(svc.Annotations, release)
				svc.Labels = UngrantedLabels(svc.Labels)
			}); err != nil {
				return false, err
			}
			log.FromContext(ctx).Info("releasing addresses from MetalLB", "ips", ips, "mode", mode, "byGrant", byGrant, "givingUp", givingUp)
			if givingUp {
				r.Recorder.Event(svc, corev1.EventTypeNormal, ReasonReleasing, msgGivingUp(s.pinClaim(), ips, release))
			} else {
				r.Recorder.Event(svc, corev1.EventTypeNormal, ReasonReleasing, msgReleasing(ips, release, mode))
			}
			if holds && !givingUp {
				handoffsTotal.WithLabelValues(directionDetach, mode).Inc()
			}
			return false, nil
		}
		if binding.Holds(svc, ips...) {
			return false, nil // the Service watch brings it back when MetalLB lets go
		}
	}
	if !deleting && lettingGo(svc, addrs) {
		return false, nil // let go in one write; the Service watch brings it back when MetalLB has
	}

	if _, err := r.clearAssociations(ctx, s, addrs, givingUp); err != nil {
		return false, err
	}
	return true, nil
}

// letGo detaches the Service in one write (binding.LetGo): its pin, the
// driver's sharing key, the markers and the grant label go together, while
// the addresses stay associated with it until MetalLB has taken them back.
func (r *Reconciler) letGo(ctx context.Context, s *scope, ips []string, mode string) error {
	svc := s.svc
	holds := binding.Holds(svc, ips...)
	if err := patch.Meta(ctx, r, svc, func() {
		svc.Annotations = binding.WithdrawnAnnotations(svc.Annotations)
		svc.Labels = UngrantedLabels(svc.Labels)
	}); err != nil {
		return err
	}
	log.FromContext(ctx).Info("releasing addresses from MetalLB in one write", "ips", ips, "mode", mode)
	r.Recorder.Event(svc, corev1.EventTypeNormal, ReasonReleasing, msgLettingGo(ips, mode))
	if holds {
		handoffsTotal.WithLabelValues(directionDetach, mode).Inc()
	}
	return nil
}

// asksFor reports whether the Service's claim annotation still names the
// claim of one of addrs: then it is not let go in one write (binding.LetGo
// tells such a Service from one a gap handoff is attaching by the
// annotation).
func asksFor(svc *corev1.Service, addrs []*iadv1alpha1.IPAddress) bool {
	return slices.ContainsFunc(addrs, func(a *iadv1alpha1.IPAddress) bool { return binding.Asks(svc, a) })
}

// lettingGo reports whether one of addrs was let go in one write
// (binding.LetGo) and the Service's ingress still shows it: MetalLB has not
// taken it back yet, and the association keeps the Service authorized
// until it has.
func lettingGo(svc *corev1.Service, addrs []*iadv1alpha1.IPAddress) bool {
	for _, a := range addrs {
		if binding.LetGo(a, svc) && binding.Holds(svc, addressIPs([]*iadv1alpha1.IPAddress{a})...) {
			return true
		}
	}
	return false
}

// heldBeside reports whether one of each address's own placeholders holds
// it beside the Service (a shared attachment), looking up from the cache
// the Services that hold each IP.
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

// holdersOf returns, from the cache, the Services whose ingress shows the
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
// markers (only when the driver wrote the pin) and the grant label from a
// Service that is not being deleted, with an Event when the addresses were
// given up.
func (r *Reconciler) withdraw(ctx context.Context, s *scope, addrs []*iadv1alpha1.IPAddress, givingUp bool) error {
	svc := s.svc
	_, ours := svc.Annotations[names.AnnotationPinnedBy]
	if (ours || len(addrs) > 0) && svc.DeletionTimestamp == nil {
		orig := svc.DeepCopy()
		if ours {
			svc.Annotations = binding.WithdrawnAnnotations(svc.Annotations)
		}
		svc.Labels = UngrantedLabels(svc.Labels)
		if !maps.Equal(orig.Annotations, svc.Annotations) || !maps.Equal(orig.Labels, svc.Labels) {
			if err := patch.MetaSince(ctx, r, svc, orig); err != nil {
				return err
			}
			log.FromContext(ctx).Info("withdrew the pin and the grant")
			if givingUp && len(addrs) > 0 {
				r.Recorder.Event(svc, corev1.EventTypeNormal, ReasonDetached, msgGivenUp(s.pinClaim(), addressIPs(addrs)))
			}
		}
	}
	return nil
}

// poolsRequireGrant reports whether the pool of every one of addrs' classes
// admits only Services carrying the grant label (read from the cache): a
// detach then takes the addresses back by withdrawing the label. A pool
// rendered by an older driver that does not require it yet is released
// with the release pin instead.
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
		if !names.PoolRequiresGrant(pool, a.Spec.ClassName) {
			return false, nil
		}
	}
	return len(addrs) > 0, nil
}

// clearAssociations clears status.associatedTo on those of addrs that are
// associated with the Service, with Events on both (saying the addresses
// were given up when givingUp is set). It reports whether it cleared any.
func (r *Reconciler) clearAssociations(ctx context.Context, s *scope, addrs []*iadv1alpha1.IPAddress, givingUp bool) (bool, error) {
	svc := s.svc
	cleared := false
	for _, a := range addrs {
		if !AssociatedWith(a, svc.Namespace, svc.Name) {
			continue
		}
		if err := patch.Status(ctx, r, a, func() { a.Status.AssociatedTo = nil }); err != nil {
			if apierrors.IsNotFound(err) {
				continue // torn down meanwhile
			}
			return cleared, err
		}
		cleared = true
		log.FromContext(ctx).Info("detached address", "address", a.Name, "ip", a.Spec.Address, "givingUp", givingUp)
		if givingUp {
			r.Recorder.Event(a, corev1.EventTypeNormal, ReasonDetached, msgGivenUpAddress(svc.Namespace, svc.Name))
			continue
		}
		r.Recorder.Eventf(svc, corev1.EventTypeNormal, ReasonDetached,
			"Detached %s (IPAddress %s); it stays reserved for its claim", a.Spec.Address, a.Name)
		r.Recorder.Eventf(a, corev1.EventTypeNormal, ReasonDetached,
			"Detached from Service %s/%s; the address stays reserved for its claim", svc.Namespace, svc.Name)
	}
	return cleared, nil
}

// handedBack reports whether every one of addrs is handed back
// (HandedBack), looking up from the cache the Services that hold each IP.
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

// forget handles a Service that is gone from the cache: the controller drops
// what it remembers of it and, once the API server confirms it is gone,
// detaches the addresses still associated with it (the safety net for a
// finalizer removed by hand).
func (r *Reconciler) forget(ctx context.Context, key types.NamespacedName) error {
	r.verdicts.forget(key)
	r.imports.forget(key)
	r.handoffs.forget(key)
	r.holders.set(key, nil)
	var mine iadv1alpha1.IPAddressList
	if err := r.List(ctx, &mine, client.MatchingFields{index.AddressByAssociation: index.Key(key.Namespace, key.Name)}); err != nil {
		return err
	}
	if len(mine.Items) == 0 {
		return nil
	}
	err := r.APIReader.Get(ctx, key, &corev1.Service{})
	if err == nil {
		return nil // only the cache lags; the Service's own event follows
	}
	if !apierrors.IsNotFound(err) {
		return err
	}
	for i := range mine.Items {
		a := &mine.Items[i]
		if err := patch.Status(ctx, r, a, func() { a.Status.AssociatedTo = nil }); err != nil {
			return err
		}
		log.FromContext(ctx).Info("detached address of a deleted Service", "address", a.Name)
		r.Recorder.Eventf(a, corev1.EventTypeNormal, ReasonDetached,
			"Detached from Service %s/%s, which was deleted; the address stays reserved for its claim", key.Namespace, key.Name)
	}
	return nil
}
