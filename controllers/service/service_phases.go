package service

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/binding"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/patch"
)

// scope is what one pass fetched about a Service.
type scope struct {
	svc *corev1.Service
	key types.NamespacedName
	// claimName is the claim the Service's annotation names ("" if none).
	claimName string
	// claim is that claim, nil when it does not exist.
	claim *iadv1alpha1.IPAddressClaim
	// addrs are the claim's addresses of classes this driver serves: bound
	// to the claim's uid and not being deleted, sorted by name.
	addrs []*iadv1alpha1.IPAddress
	// foreign counts the claim's addresses of classes other drivers serve.
	foreign int
	// mine are the addresses associated with this Service, sorted by name.
	mine []*iadv1alpha1.IPAddress
	// pinnedFor are the addresses the driver's pin on the Service is for:
	// addresses of the claim its pinned-by marker names (in its namespace),
	// of classes this driver serves, whose IP the pin
	// names or the Service holds, including addresses being deleted. While
	// a Service is detached in a shared handoff they are no longer
	// associated with it but it still holds them; nil when the Service
	// carries no marker.
	pinnedFor []*iadv1alpha1.IPAddress
	// otherHolder is another live Service one of addrs is associated with.
	otherHolder string
	// otherAddress is the address associated with otherHolder.
	otherAddress *iadv1alpha1.IPAddress
	// otherDetaching: otherHolder is being deleted or no longer names the claim.
	otherDetaching bool
}

// observe fetches, from the cache, everything one pass decides on.
func (r *Reconciler) observe(ctx context.Context, svc *corev1.Service) (*scope, error) {
	s := &scope{svc: svc, key: client.ObjectKeyFromObject(svc),
		claimName: strings.TrimSpace(svc.Annotations[iadv1alpha1.ServiceClaimAnnotation])}

	var mine iadv1alpha1.IPAddressList
	if err := r.List(ctx, &mine, client.MatchingFields{index.AddressByAssociation: index.Key(svc.Namespace, svc.Name)}); err != nil {
		return nil, err
	}
	for i := range mine.Items {
		s.mine = append(s.mine, &mine.Items[i])
	}
	sortByName(s.mine)
	if err := r.observePinnedFor(ctx, s); err != nil {
		return nil, err
	}

	if s.claimName == "" {
		return s, nil
	}
	claim := &iadv1alpha1.IPAddressClaim{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: svc.Namespace, Name: s.claimName}, claim); err != nil {
		if apierrors.IsNotFound(err) {
			return s, nil
		}
		return nil, err
	}
	s.claim = claim

	var bound iadv1alpha1.IPAddressList
	if err := r.List(ctx, &bound, client.MatchingFields{index.AddressByClaim: index.Key(claim.Namespace, claim.Name)}); err != nil {
		return nil, err
	}
	for i := range bound.Items {
		a := &bound.Items[i]
		if a.Spec.ClaimRef.UID != string(claim.UID) || a.DeletionTimestamp != nil {
			continue
		}
		ours, err := r.servedClass(ctx, a.Spec.ClassName)
		if err != nil {
			return nil, err
		}
		if !ours {
			s.foreign++
			continue
		}
		s.addrs = append(s.addrs, a)
	}
	sortByName(s.addrs)

	for _, a := range s.addrs {
		at := a.Status.AssociatedTo
		if at == nil || AssociatedWith(a, svc.Namespace, svc.Name) {
			continue
		}
		if at.Kind != "Service" {
			s.otherHolder, s.otherAddress = fmt.Sprintf("%s %s/%s", at.Kind, at.Namespace, at.Name), a
			break
		}
		other := &corev1.Service{}
		err := r.Get(ctx, types.NamespacedName{Namespace: at.Namespace, Name: at.Name}, other)
		if err == nil {
			s.otherHolder, s.otherAddress = at.Namespace+"/"+at.Name, a
			s.otherDetaching = other.DeletionTimestamp != nil ||
				other.Namespace != svc.Namespace || other.Annotations[iadv1alpha1.ServiceClaimAnnotation] != s.claimName
			break
		}
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
		// Associated with a Service that is gone: stale, ours to take over.
	}
	if s.otherHolder == "" {
		return s, r.observeAttachGrant(ctx, s)
	}
	return s, nil
}

// observeAttachGrant fills otherHolder from the attach grant
// (names.AnnotationAttaching) on the claim's addresses, when none of them
// is associated elsewhere: another Service holds the grant while it still
// asks for the claim, and is on its way out while it no longer asks for it
// but still carries the driver's pin for it. A grant naming a Service that
// is gone, or that neither asks for the claim nor carries its pin, is free
// to take over.
func (r *Reconciler) observeAttachGrant(ctx context.Context, s *scope) error {
	svc := s.svc
	me := index.Key(svc.Namespace, svc.Name)
	for _, a := range s.addrs {
		holder := a.Annotations[names.AnnotationAttaching]
		if holder == "" || holder == me || AssociatedWith(a, svc.Namespace, svc.Name) {
			continue
		}
		ns, name, ok := strings.Cut(holder, "/")
		if !ok || ns != svc.Namespace {
			continue // a grant can only name a Service in the claim's namespace
		}
		other, err := r.liveService(ctx, types.NamespacedName{Namespace: ns, Name: name})
		if err != nil {
			return err
		}
		if other == nil {
			continue
		}
		asks := other.DeletionTimestamp == nil && strings.TrimSpace(other.Annotations[iadv1alpha1.ServiceClaimAnnotation]) == s.claimName
		pinned := other.Annotations[names.AnnotationPinnedBy] == s.claimName
		if asks || pinned {
			s.otherHolder, s.otherAddress, s.otherDetaching = holder, a, !asks
			return nil
		}
	}
	return nil
}

// liveService reads a Service from the cache and, when the cache does not
// have it, from the API server (a Service created a moment ago may not be
// in the cache yet); nil when it does not exist.
func (r *Reconciler) liveService(ctx context.Context, key types.NamespacedName) (*corev1.Service, error) {
	svc := &corev1.Service{}
	err := r.Get(ctx, key, svc)
	if apierrors.IsNotFound(err) {
		err = r.APIReader.Get(ctx, key, svc)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return svc, nil
}

// observePinnedFor fills s.pinnedFor.
func (r *Reconciler) observePinnedFor(ctx context.Context, s *scope) error {
	svc := s.svc
	by := svc.Annotations[names.AnnotationPinnedBy]
	if by == "" {
		return nil
	}
	want := map[string]bool{}
	for _, ip := range names.SplitIPs(svc.Annotations[names.MetalLBLoadBalancerIPs]) {
		want[ip] = true
	}
	for _, ip := range binding.IngressIPs(svc) {
		want[ip] = true
	}
	var list iadv1alpha1.IPAddressList
	if err := r.List(ctx, &list, client.MatchingFields{index.AddressByClaim: index.Key(svc.Namespace, by)}); err != nil {
		return err
	}
	for i := range list.Items {
		a := &list.Items[i]
		ip, err := names.ParseAddress(a.Spec.Address)
		// An address being deleted stays in: its teardown takes it back
		// from the Service through the same release sequence.
		if err != nil || !want[ip.String()] {
			continue
		}
		ours, err := r.servedClass(ctx, a.Spec.ClassName)
		if err != nil {
			return err
		}
		if ours {
			s.pinnedFor = append(s.pinnedFor, a)
		}
	}
	sortByName(s.pinnedFor)
	return nil
}

// servedClass reports whether the class exists and names this driver.
func (r *Reconciler) servedClass(ctx context.Context, name string) (bool, error) {
	class := &iadv1alpha1.IPAddressClass{}
	if err := r.Get(ctx, types.NamespacedName{Name: name}, class); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return class.Spec.Provisioner == names.Provisioner, nil
}

// situation reduces the scope to the decision's inputs.
func (s *scope) situation() Situation {
	sit := Situation{
		Claim:          s.claimName,
		Deleting:       s.svc.DeletionTimestamp != nil,
		LoadBalancer:   s.svc.Spec.Type == corev1.ServiceTypeLoadBalancer,
		OtherHolder:    s.otherHolder,
		OtherDetaching: s.otherDetaching,
		HandPin:        HandPin(s.svc),
		Desired:        PinValue(addressIPs(s.addrs)),
	}
	if c := s.claim; c != nil {
		sit.ClaimFound = true
		sit.ClaimDeleting = c.DeletionTimestamp != nil
		sit.ClaimPhase = c.Status.Phase
		sit.FamilyProblem = FamilyMismatch(s.svc, c.Name, c.Spec.Family)
		sit.Wanted = len(c.Spec.Family.Families())
		sit.Ours = len(s.addrs)
		sit.Foreign = s.foreign
		for _, a := range s.addrs {
			if AssociatedWith(a, s.svc.Namespace, s.svc.Name) {
				sit.AssociatedHere++
			}
		}
	}
	return sit
}

// reportOtherHolder records, on the address already associated elsewhere,
// that a second Service asked for it.
func (r *Reconciler) reportOtherHolder(s *scope) {
	if s.otherAddress == nil {
		return
	}
	r.Recorder.Eventf(s.otherAddress, corev1.EventTypeWarning, ReasonClaimAlreadyAssociated,
		"Service %s/%s asks for claim %q, whose address is already attached to Service %s; it gets no pin",
		s.svc.Namespace, s.svc.Name, s.claimName, s.otherHolder)
}

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
		if done, err := r.detach(ctx, s, stale, false); err != nil || !done {
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
//  1. the pin, the claim's sharing key and both authorship markers on the
//     Service, in one patch: MetalLB gives the Service each address while
//     its placeholder keeps it too (the same key, ports apart);
//  2. wait until the Service holds every address;
//  3. status.associatedTo on each address; the IPAddress controller then
//     deletes the placeholders.
//
// No address is unheld at any instant.
func (r *Reconciler) associateShared(ctx context.Context, s *scope, ips []string, key string) error {
	svc := s.svc
	pin := PinValue(ips)
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

	pin := PinValue(ips)
	pinned, err := r.pin(ctx, s, pin, key)
	if err != nil {
		return err
	}
	if pinned || (newly && HandPin(svc) != "") {
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

func containsAddress(list []*iadv1alpha1.IPAddress, a *iadv1alpha1.IPAddress) bool {
	return slices.ContainsFunc(list, func(b *iadv1alpha1.IPAddress) bool { return b.UID == a.UID })
}

// removeFinalizer removes the association finalizer earlier versions put
// on Services they attached, with an optimistic lock (a merge patch
// replaces the whole finalizer list). It reports whether the Service is
// gone with it (it was being deleted and held only by that finalizer).
func (r *Reconciler) removeFinalizer(ctx context.Context, svc *corev1.Service) (bool, error) {
	removed, err := patch.RemoveFinalizer(ctx, r, svc, AssociationFinalizer)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil || !removed {
		return false, err
	}
	log.FromContext(ctx).Info("removed the association finalizer of an earlier version")
	return svc.DeletionTimestamp != nil && len(svc.Finalizers) == 0, nil
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
	want := svc.Annotations
	if HandPin(svc) == "" {
		want = PinAnnotations(svc.Annotations, s.claimName, value, key)
	}
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
	if svc.ResourceVersion == read || !pinning {
		return false, nil // the cache lagged, or only the grant label was missing (an attachment made by an older driver)
	}
	log.FromContext(ctx).Info("pinned", "loadBalancerIPs", value, "claim", s.claimName, "shared", key != "")
	return true, nil
}

// detach reverses the handoff for addrs (the addresses the Service holds or
// is associated with that it should not be). Each step re-converges after
// a crash. While the driver's pin is on the Service and it is not being
// deleted:
//
//   - shared handoff, when the Service holds the addresses and carries the
//     driver's sharing key (it can share them with placeholders), and the
//     addresses are kept (not given up): clear status.associatedTo first
//     (the IPAddress controller re-arms the hold; the new placeholder
//     shares the address with the Service), and wait until each address is
//     handed back (HandedBack);
//   - then, in both modes, the release sequence (binding.ReleaseAnnotations):
//     replace the pin with the release pin and withdraw the sharing key, so
//     MetalLB takes the addresses back, and wait until the Service's
//     ingress no longer shows them. The pinned-by marker keeps the Service
//     authorized meanwhile.
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
// re-arms the hold) and, when full is set (nothing stays associated), the
// driver's pin, key and markers are withdrawn (never a pin or key without
// its marker). Every annotation patch carries an optimistic lock. It
// reports whether it finished.
func (r *Reconciler) detach(ctx context.Context, s *scope, addrs []*iadv1alpha1.IPAddress, full bool) (bool, error) {
	svc := s.svc
	_, ours := svc.Annotations[names.AnnotationPinnedBy]
	deleting := svc.DeletionTimestamp != nil
	if full {
		for _, a := range s.pinnedFor {
			if !containsAddress(addrs, a) {
				addrs = append(addrs, a)
			}
		}
	}
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
			mode := ModeGap
			key := SharingKeyOf(addrs)
			if !givingUp && binding.Holds(svc, ips...) && SharesOurKey(svc) && svc.Annotations[names.MetalLBAllowSharedIP] == key && ShareProblem(svc, key) == "" {
				cleared, err := r.clearAssociations(ctx, s, addrs, false)
				if err != nil {
					return false, err
				}
				if cleared {
					r.Recorder.Event(svc, corev1.EventTypeNormal, ReasonHandingBack, msgHandingBack(ips))
				}
				back, err := r.handedBack(ctx, s, addrs)
				if err != nil || !back {
					return false, err // the address and placeholder watches bring the Service back
				}
				mode = ModeShared
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

	if _, err := r.clearAssociations(ctx, s, addrs, givingUp); err != nil {
		return false, err
	}
	if !full {
		return true, nil
	}

	if (ours || len(addrs) > 0) && !deleting {
		orig := svc.DeepCopy()
		if ours {
			svc.Annotations = binding.WithdrawnAnnotations(svc.Annotations)
		}
		svc.Labels = UngrantedLabels(svc.Labels)
		if !maps.Equal(orig.Annotations, svc.Annotations) || !maps.Equal(orig.Labels, svc.Labels) {
			if err := patch.MetaSince(ctx, r, svc, orig); err != nil {
				return false, err
			}
			log.FromContext(ctx).Info("withdrew the pin and the grant")
			if givingUp && len(addrs) > 0 {
				r.Recorder.Event(svc, corev1.EventTypeNormal, ReasonDetached, msgGivenUp(s.pinClaim(), ips))
			}
		}
	}
	return true, nil
}

// pinClaim is the claim the Service's pin is for: its pinned-by marker, or
// else the claim its annotation names.
func (s *scope) pinClaim() string {
	if by := s.svc.Annotations[names.AnnotationPinnedBy]; by != "" {
		return by
	}
	return s.claimName
}

// givingUp reports whether addrs are being given up rather than kept: one
// of them is being deleted, or the claim the Service's pin is for is gone
// or being deleted and one of them goes with it (reclaimPolicy Delete).
// Under Retain the addresses stay held (Released), so they are detached
// as usual.
func (s *scope) givingUp(addrs []*iadv1alpha1.IPAddress) bool {
	deletes := false
	for _, a := range addrs {
		if a.DeletionTimestamp != nil {
			return true
		}
		deletes = deletes || a.Spec.ReclaimPolicy == iadv1alpha1.ReclaimDelete
	}
	if !deletes || s.pinClaim() != s.claimName {
		return false
	}
	return s.claim == nil || s.claim.DeletionTimestamp != nil
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
		var holders corev1.ServiceList
		for _, ip := range addressIPs([]*iadv1alpha1.IPAddress{a}) {
			if err := r.List(ctx, &holders, client.MatchingFields{index.ServiceByIngressIP: ip}); err != nil {
				return false, err
			}
		}
		if !HandedBack(a, s.svc, holders.Items, r.PlaceholderNamespace) {
			return false, nil
		}
	}
	return true, nil
}

// forget handles a Service that is gone from the cache: once the API server
// confirms it, the addresses still associated with it are detached (the
// safety net for a finalizer removed by hand).
func (r *Reconciler) forget(ctx context.Context, key types.NamespacedName) error {
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

// detectConflicts looks every IP of the Service's load-balancer ingress up
// in the ledger. An address of one of our classes whose binding does not
// authorize the Service goes to phase Conflict, with condition Conflict and
// Events on both objects naming each other. An IP of one of our classes'
// ranges that no IPAddress records was taken from the class pool without a
// claim. Both are unauthorized holdings of the class: counted in
// metallb_iad_unauthorized_holders and reported once each with an
// UnclaimedAddress Warning on the Service and on the class. Placeholders in
// the placeholder namespace are exempt; IPs outside our classes' ranges are
// not our business.
func (r *Reconciler) detectConflicts(ctx context.Context, s *scope) error {
	svc := s.svc
	if svc.DeletionTimestamp != nil || binding.Exempt(svc, r.PlaceholderNamespace) {
		r.holders.set(s.key, nil)
		return nil
	}
	var grabs []grab
	var classes []classRanges
	for _, ip := range binding.IngressIPs(svc) {
		var hits iadv1alpha1.IPAddressList
		if err := r.List(ctx, &hits, client.MatchingFields{index.AddressByIP: ip}); err != nil {
			return err
		}
		recorded := false
		for i := range hits.Items {
			a := &hits.Items[i]
			ours, err := r.servedClass(ctx, a.Spec.ClassName)
			if err != nil {
				return err
			}
			if !ours {
				continue
			}
			recorded = true
			// An address being deleted is leaving the ledger: its
			// teardown takes it back from whoever holds it.
			// A Lost address is outside its class's pool: whoever holds the
			// IP got it from another pool, and the IPAddress controller,
			// which owns Lost, reports it until the range returns.
			if a.DeletionTimestamp != nil || Authorized(svc, a) || a.Status.Phase == iadv1alpha1.AddressLost {
				continue
			}
			grabs = append(grabs, grab{Class: a.Spec.ClassName, IP: ip, Address: a.Name})
			if err := r.markConflict(ctx, svc, a, ip); err != nil {
				return err
			}
		}
		if recorded {
			continue
		}
		if classes == nil {
			var err error
			if classes, err = r.servedClassRanges(ctx); err != nil {
				return err
			}
		}
		if c := classOfIP(classes, ip); c != "" {
			grabs = append(grabs, grab{Class: c, IP: ip})
		}
	}
	r.reportUnauthorized(ctx, svc, grabs)
	return nil
}

// markConflict sets phase Conflict and condition Conflict on an address held
// by an unauthorized Service, and records Events on both. An address already
// in Conflict over some Service is left as it is.
func (r *Reconciler) markConflict(ctx context.Context, svc *corev1.Service, a *iadv1alpha1.IPAddress, ip string) error {
	if a.Status.Phase == iadv1alpha1.AddressConflict && conditions.IsTrue(a.Status.Conditions, conditions.Conflict) {
		return nil
	}
	if err := patch.Status(ctx, r, a, func() {
		a.Status.Phase = iadv1alpha1.AddressConflict
		conditions.Set(&a.Status.Conditions, conditions.Conflict, metav1.ConditionTrue,
			conditions.ReasonUnauthorizedHolder, conflictMessage(svc, ip), a.Generation)
	}); err != nil {
		return err
	}
	log.FromContext(ctx).Info("address conflict", "address", a.Name, "ip", ip)
	binding := "no claim"
	if ref := a.Spec.ClaimRef; ref != nil {
		binding = "claim " + ref.Namespace + "/" + ref.Name
	}
	r.Recorder.Eventf(svc, corev1.EventTypeWarning, ReasonAddressConflict,
		"Service holds %s, which is IPAddress %s (bound to %s), without that binding authorizing it; remove its pin to %s",
		ip, a.Name, binding, ip)
	r.Recorder.Eventf(a, corev1.EventTypeWarning, ReasonAddressConflict,
		"Service %s/%s holds %s in MetalLB without this address's binding authorizing it", svc.Namespace, svc.Name, ip)
	return nil
}

func sortByName(addrs []*iadv1alpha1.IPAddress) {
	slices.SortFunc(addrs, func(a, b *iadv1alpha1.IPAddress) int { return strings.Compare(a.Name, b.Name) })
}
