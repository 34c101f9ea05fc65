package service

import (
	"context"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/binding"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/patch"
)

// associate runs the forward handoff. It first detaches the addresses of a
// previous claim (the annotation changed) and takes the attach grant on the
// claim's addresses (grantAttach), then runs the shared handoff where MetalLB lets
// the Service share the claim's addresses with their placeholders
// (ShareProblem), and the gap handoff otherwise. Every step is idempotent
// and checks the cluster's state first, so any prefix of either re-converges
// after a crash.
func (r *Reconciler) associate(ctx context.Context, s *scope) error {
	svc := s.svc
	ips := addressIPs(s.addrs)
	if !binding.HoldsAll(svc, ips...) {
		r.handoffs.start(s.key, svc.UID)
	}

	var stale []*iadv1alpha1.IPAddress
	for _, a := range append(slices.Clone(s.mine), s.pinnedFor...) {
		if !containsAddress(s.addrs, a) && !containsAddress(stale, a) {
			stale = append(stale, a)
		}
	}
	if len(stale) > 0 {
		if done, err := r.detachStale(ctx, s, stale); err != nil || !done {
			return err
		}
	}

	if err := r.grantAttach(ctx, s); err != nil {
		return err
	}

	// The Service carries the claim's sharing key whenever it can share,
	// whichever handoff brought it the addresses, so that its detach can be
	// a shared handoff.
	key := SharingKeyOf(s.addrs)
	problem := ShareProblem(svc, key)
	if problem != "" {
		key = ""
	}
	released := false
	for _, a := range s.addrs {
		released = released || (Released(a) && AssociatedWith(a, svc.Namespace, svc.Name))
	}
	mode, why := AttachMode(problem, released, binding.HoldsAll(svc, ips...))
	if mode == ModeShared {
		return r.associateShared(ctx, s, ips, key)
	}
	return r.associateGap(ctx, s, ips, key, why)
}

// associateShared is the shared handoff:
//
//  1. once every placeholder holding the addresses carries the claim's
//     sharing key (the IPAddress controller gives it on seeing the attach
//     grant, UnkeyedHolder), the pin, the key and both authorship markers
//     on the Service, in one patch: MetalLB gives the Service each address
//     while its placeholder keeps it too (the same key, ports apart);
//  2. wait until the Service holds every address;
//  3. status.associatedTo on each address. The IPAddress controller keeps
//     the hold placeholders for the whole attachment (binding.SharesHold):
//     both hold each address, so attaching deletes nothing, and detaching
//     or deleting the Service leaves each address held.
//
// No address is unheld at any instant.
func (r *Reconciler) associateShared(ctx context.Context, s *scope, ips []string, key string) error {
	svc := s.svc
	pin := binding.PinValue(ips)
	if !binding.HoldsAll(svc, ips...) {
		for _, ip := range ips {
			var holders corev1.ServiceList
			if err := r.List(ctx, &holders, client.MatchingFields{index.ServiceByIngressIP: ip}); err != nil {
				return err
			}
			if h := UnkeyedHolder(holders.Items, key, r.PlaceholderNamespace); h != nil {
				log.FromContext(ctx).V(1).Info("waiting for the hold placeholder to carry the claim's sharing key",
					"ip", ip, "placeholder", client.ObjectKeyFromObject(h))
				return nil // the placeholder watch brings the Service back (sharersOfPlaceholder)
			}
		}
	}
	if _, err := r.pin(ctx, s, pin, key); err != nil {
		return err
	}
	if !binding.HoldsAll(svc, ips...) {
		log.FromContext(ctx).V(1).Info("waiting for MetalLB to share the addresses with the Service", "ips", ips)
		return nil // the Service watch brings it back
	}
	newly, err := r.recordAssociation(ctx, s)
	if err != nil {
		return err
	}
	if newly {
		r.recordAssociated(s, pin, ModeShared, "")
	}
	r.handoffs.done(s.key, svc.UID, ModeShared)
	return nil
}

// associateGap is the gap handoff:
//
//  1. status.associatedTo on each address (this disarms the hold);
//  2. wait until each address reports Held False (the hold is released);
//  3. the pin and the authorship marker on the Service.
//
// Between the release and MetalLB's assignment to the Service the address
// is held by nobody. key is the sharing key to write with the pin ("" when
// the Service cannot share); problem says why the shared handoff was not
// possible.
func (r *Reconciler) associateGap(ctx context.Context, s *scope, ips []string, key, problem string) error {
	svc := s.svc
	newly, err := r.recordAssociation(ctx, s)
	if err != nil {
		return err
	}
	released := true
	for _, a := range s.addrs {
		if Released(a) {
			r.handoffs.released(s.key, svc.UID)
		} else {
			released = false
		}
	}
	if !released {
		log.FromContext(ctx).V(1).Info("waiting for the holds to be released")
		return nil // the address watch brings the Service back
	}

	pin := binding.PinValue(ips)
	pinned, err := r.pin(ctx, s, pin, key)
	if err != nil {
		return err
	}
	if pinned || (newly && binding.HandPin(svc) != "") {
		r.recordAssociated(s, pin, ModeGap, problem)
	}
	if binding.HoldsAll(svc, ips...) {
		r.handoffs.done(s.key, svc.UID, ModeGap)
	}
	return nil
}

// recordAssociated records the Associated Events on the Service and its
// addresses.
func (r *Reconciler) recordAssociated(s *scope, pin, mode, problem string) {
	svc := s.svc
	r.Recorder.Event(svc, corev1.EventTypeNormal, ReasonAssociated, msgAssociated(s.claimName, pin, mode, problem))
	for _, a := range s.addrs {
		r.Recorder.Event(a, corev1.EventTypeNormal, ReasonAssociated, msgAssociatedAddress(svc.Namespace, svc.Name, s.claimName, mode))
	}
}

// grantAttach takes the attach grant for the Service on each of the
// claim's addresses, in name order, before anything is pinned or
// recorded: one metadata patch per address with an optimistic lock, so of
// two Services naming the claim at the same instant exactly one gets it
// and the other, on its next pass, sees the grant (observeAttachGrant) and
// is rejected without ever being pinned.
func (r *Reconciler) grantAttach(ctx context.Context, s *scope) error {
	me := index.Key(s.svc.Namespace, s.svc.Name)
	for _, a := range s.addrs {
		if a.Annotations[names.AnnotationAttaching] == me {
			continue
		}
		if err := patch.Meta(ctx, r, a, func() {
			if a.Annotations == nil {
				a.Annotations = map[string]string{}
			}
			a.Annotations[names.AnnotationAttaching] = me
		}); err != nil {
			return err
		}
		log.FromContext(ctx).V(1).Info("took the attach grant", "address", a.Name)
	}
	return nil
}

// recordAssociation is step 1: status.associatedTo naming the Service on
// each of the claim's addresses, in name order (two Services racing for the
// same claim collide on the first address). It reports whether it wrote any.
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

// pin writes the MetalLB pin and the pinned-by marker and, with a key (the
// shared handoff), the sharing key and the shared-by marker, in one merge
// patch of the Service's annotations; without a key it withdraws a sharing
// key the driver wrote. A pin the driver did not write that already asks
// for exactly these addresses is left alone (and stays the tenant's). It
// reports whether it wrote anything.
func (r *Reconciler) pin(ctx context.Context, s *scope, value, key string) (bool, error) {
	svc := s.svc
	var want map[string]string
	if binding.HandPin(svc) == "" {
		want = PinAnnotations(svc.Annotations, s.claimName, value, key)
	} else {
		want = binding.CloneAnnotations(svc.Annotations)
		binding.TakeOverPool(want)
	}
	took := binding.TakeOverPool(binding.CloneAnnotations(svc.Annotations))
	// The grant label lets MetalLB give the Service an address of the
	// class pool; it goes with the pin (and on a Service an administrator
	// pinned by hand, which the driver attached all the same).
	labels := GrantLabels(svc.Labels, ClassOf(s.addrs))
	pinning := !maps.Equal(want, svc.Annotations)
	if !pinning && maps.Equal(labels, svc.Labels) {
		return false, nil
	}
	read := svc.ResourceVersion
	if err := patch.Meta(ctx, r, svc, func() { svc.Annotations, svc.Labels = want, labels }); err != nil {
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
