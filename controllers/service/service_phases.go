package service

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/names"
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
	return s, nil
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

// associate runs the forward handoff. It first ensures the association
// finalizer on the Service and detaches the addresses of a previous claim
// (the annotation changed), then runs the gap handoff:
//
//  1. status.associatedTo on each address (this disarms the hold);
//  2. wait until each address reports Held False (the hold is released);
//  3. the pin and the authorship marker on the Service.
//
// Every step is idempotent and checks the cluster's state first, so any
// prefix of it re-converges after a crash.
func (r *Reconciler) associate(ctx context.Context, s *scope) error {
	svc := s.svc
	ips := addressIPs(s.addrs)
	if !HoldsAll(svc, ips) {
		r.handoffs.start(s.key, svc.UID)
	}

	if err := r.ensureFinalizer(ctx, svc); err != nil {
		return err
	}
	var stale []*iadv1alpha1.IPAddress
	for _, a := range s.mine {
		if !slices.ContainsFunc(s.addrs, func(b *iadv1alpha1.IPAddress) bool { return b.UID == a.UID }) {
			stale = append(stale, a)
		}
	}
	if len(stale) > 0 {
		if done, err := r.detach(ctx, s, stale, false); err != nil || !done {
			return err
		}
	}

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

	pinned, err := r.pin(ctx, s, PinValue(ips))
	if err != nil {
		return err
	}
	if pinned || (newly && HandPin(svc) != "") {
		r.Recorder.Eventf(svc, corev1.EventTypeNormal, ReasonAssociated,
			"Attached claim %q: MetalLB is asked for %s", s.claimName, PinValue(ips))
		for _, a := range s.addrs {
			r.Recorder.Eventf(a, corev1.EventTypeNormal, ReasonAssociated,
				"Attached to Service %s/%s (claim %s/%s)", svc.Namespace, svc.Name, svc.Namespace, s.claimName)
		}
	}
	if HoldsAll(svc, ips) {
		r.handoffs.done(s.key, svc.UID)
	}
	return nil
}

// ensureFinalizer adds the association finalizer, so the controller sees the
// Service's deletion before it goes.
func (r *Reconciler) ensureFinalizer(ctx context.Context, svc *corev1.Service) error {
	if controllerutil.ContainsFinalizer(svc, AssociationFinalizer) {
		return nil
	}
	orig := svc.DeepCopy()
	controllerutil.AddFinalizer(svc, AssociationFinalizer)
	return r.Patch(ctx, svc, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
}

// removeFinalizer lets the Service go.
func (r *Reconciler) removeFinalizer(ctx context.Context, svc *corev1.Service) error {
	if !controllerutil.ContainsFinalizer(svc, AssociationFinalizer) {
		return nil
	}
	orig := svc.DeepCopy()
	controllerutil.RemoveFinalizer(svc, AssociationFinalizer)
	err := r.Patch(ctx, svc, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
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
		orig := a.DeepCopy()
		a.Status.AssociatedTo = &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: s.svc.Namespace, Name: s.svc.Name}
		if err := r.Status().Patch(ctx, a, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return wrote, err
		}
		log.FromContext(ctx).Info("associated address", "address", a.Name, "ip", a.Spec.Address, "claim", s.claimName)
		wrote = true
	}
	return wrote, nil
}

// pin is step 3: the MetalLB pin and the authorship marker, in one merge
// patch of the Service's annotations. A pin the driver did not write that
// already asks for exactly these addresses is left alone (and stays the
// tenant's). It reports whether it wrote anything.
func (r *Reconciler) pin(ctx context.Context, s *scope, value string) (bool, error) {
	svc := s.svc
	if HandPin(svc) != "" {
		return false, nil
	}
	if svc.Annotations[names.MetalLBLoadBalancerIPs] == value && svc.Annotations[names.AnnotationPinnedBy] == s.claimName {
		return false, nil
	}
	orig := svc.DeepCopy()
	if svc.Annotations == nil {
		svc.Annotations = map[string]string{}
	}
	svc.Annotations[names.MetalLBLoadBalancerIPs] = value
	svc.Annotations[names.AnnotationPinnedBy] = s.claimName
	if err := r.Patch(ctx, svc, client.MergeFrom(orig)); err != nil {
		return false, err
	}
	if svc.ResourceVersion == orig.ResourceVersion {
		return false, nil // the cache lagged: the pin was already there
	}
	log.FromContext(ctx).Info("pinned", "loadBalancerIPs", value, "claim", s.claimName)
	return true, nil
}

// detach reverses the handoff for addrs (the addresses associated with the
// Service that should not be). Each step re-converges after a crash:
//
//  1. if the driver's pin is on the Service, replace it with the release pin
//     (ReleasePinValue), so MetalLB takes the addresses back, and wait until
//     the Service's ingress no longer shows them. A Service being deleted
//     skips this: its deletion frees the addresses;
//  2. clear status.associatedTo on addrs (this re-arms the hold);
//
// and, when full is set (nothing stays associated):
//
//  3. withdraw the driver's pin and marker (never a pin without the marker);
//  4. remove the association finalizer.
//
// It reports whether it finished.
func (r *Reconciler) detach(ctx context.Context, s *scope, addrs []*iadv1alpha1.IPAddress, full bool) (bool, error) {
	svc := s.svc
	_, ours := svc.Annotations[names.AnnotationPinnedBy]
	deleting := svc.DeletionTimestamp != nil
	ips := addressIPs(addrs)

	if ours && !deleting && len(addrs) > 0 {
		release := ReleasePinValue(svc)
		if svc.Annotations[names.MetalLBLoadBalancerIPs] != release {
			orig := svc.DeepCopy()
			svc.Annotations[names.MetalLBLoadBalancerIPs] = release
			if err := r.Patch(ctx, svc, client.MergeFrom(orig)); err != nil {
				return false, err
			}
			log.FromContext(ctx).Info("releasing addresses from MetalLB", "ips", ips)
			r.Recorder.Eventf(svc, corev1.EventTypeNormal, ReasonReleasing,
				"Detaching %s: the pin is set to %q, which MetalLB cannot satisfy, until MetalLB takes the address back (MetalLB reports AllocationFailed meanwhile); then the pin is removed",
				strings.Join(ips, ","), release)
			return false, nil
		}
		if Holds(svc, ips) {
			return false, nil // the Service watch brings it back when MetalLB lets go
		}
	}

	for _, a := range addrs {
		if a.Status.AssociatedTo == nil {
			continue
		}
		orig := a.DeepCopy()
		a.Status.AssociatedTo = nil
		if err := r.Status().Patch(ctx, a, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return false, err
		}
		log.FromContext(ctx).Info("detached address", "address", a.Name, "ip", a.Spec.Address)
		r.Recorder.Eventf(svc, corev1.EventTypeNormal, ReasonDetached,
			"Detached %s (IPAddress %s); it stays reserved for its claim", a.Spec.Address, a.Name)
		r.Recorder.Eventf(a, corev1.EventTypeNormal, ReasonDetached,
			"Detached from Service %s/%s; the address stays reserved for its claim", svc.Namespace, svc.Name)
	}
	if !full {
		return true, nil
	}

	if ours && !deleting {
		orig := svc.DeepCopy()
		delete(svc.Annotations, names.MetalLBLoadBalancerIPs)
		delete(svc.Annotations, names.AnnotationPinnedBy)
		if err := r.Patch(ctx, svc, client.MergeFrom(orig)); err != nil {
			return false, err
		}
		log.FromContext(ctx).Info("withdrew the pin")
	}
	return true, r.removeFinalizer(ctx, svc)
}

// forget handles a Service that is gone from the cache: once the API server
// confirms it, the addresses still associated with it are detached (the
// safety net for a finalizer removed by hand).
func (r *Reconciler) forget(ctx context.Context, key types.NamespacedName) error {
	r.handoffs.forget(key)
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
		orig := a.DeepCopy()
		a.Status.AssociatedTo = nil
		if err := r.Status().Patch(ctx, a, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
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
// Events on both objects naming each other. Placeholders in the placeholder
// namespace are exempt; IPs outside the ledger are not our business.
func (r *Reconciler) detectConflicts(ctx context.Context, s *scope) error {
	svc := s.svc
	if svc.DeletionTimestamp != nil || Exempt(svc, r.PlaceholderNamespace) {
		return nil
	}
	for _, ip := range index.IngressIPs(svc) {
		var hits iadv1alpha1.IPAddressList
		if err := r.List(ctx, &hits, client.MatchingFields{index.AddressByIP: ip}); err != nil {
			return err
		}
		for i := range hits.Items {
			a := &hits.Items[i]
			if Authorized(svc, a) {
				continue
			}
			ours, err := r.servedClass(ctx, a.Spec.ClassName)
			if err != nil {
				return err
			}
			if !ours {
				continue
			}
			if err := r.markConflict(ctx, svc, a, ip); err != nil {
				return err
			}
		}
	}
	return nil
}

// markConflict sets phase Conflict and condition Conflict on an address held
// by an unauthorized Service, and records Events on both. An address already
// in Conflict over some Service is left as it is.
func (r *Reconciler) markConflict(ctx context.Context, svc *corev1.Service, a *iadv1alpha1.IPAddress, ip string) error {
	if a.Status.Phase == iadv1alpha1.AddressConflict && conditions.IsTrue(a.Status.Conditions, conditions.Conflict) {
		return nil
	}
	orig := a.DeepCopy()
	a.Status.Phase = iadv1alpha1.AddressConflict
	conditions.Set(&a.Status.Conditions, conditions.Conflict, metav1.ConditionTrue,
		conditions.ReasonUnauthorizedHolder, conflictMessage(svc, ip), a.Generation)
	if err := r.Status().Patch(ctx, a, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
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
