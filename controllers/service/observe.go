package service

import (
	"context"
	"fmt"
	"slices"
	"strings"

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
		ours, err := r.served(ctx, a)
		if err != nil {
			return nil, err
		}
		if !ours {
			s.foreign++
			continue
		}
		s.addrs = append(s.addrs, a)
	}
	if kept := OnePerFamily(s.addrs, svc); len(kept) < len(s.addrs) {
		log.FromContext(ctx).V(1).Info("the claim holds more than one address of a family; the Service gets one of each",
			"claim", s.claimName, "ips", addressIPs(kept))
		s.addrs = kept
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
		ours, err := r.served(ctx, a)
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

// served reports whether the driver serves an address (binding.Served):
// its class names this driver, or its class is gone and the address is
// still the driver's.
func (r *Reconciler) served(ctx context.Context, a *iadv1alpha1.IPAddress) (bool, error) {
	class := &iadv1alpha1.IPAddressClass{}
	if err := r.Get(ctx, types.NamespacedName{Name: a.Spec.ClassName}, class); err != nil {
		if !apierrors.IsNotFound(err) {
			return false, err
		}
		class = nil
	}
	return binding.Served(a, class), nil
}

// situation reduces the scope to the decision's inputs.
func (s *scope) situation() Situation {
	sit := Situation{
		Claim:          s.claimName,
		Deleting:       s.svc.DeletionTimestamp != nil,
		LoadBalancer:   s.svc.Spec.Type == corev1.ServiceTypeLoadBalancer,
		OtherHolder:    s.otherHolder,
		OtherDetaching: s.otherDetaching,
		HandPin:        binding.HandPin(s.svc),
		Desired:        binding.PinValue(addressIPs(s.addrs)),
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

func sortByName(addrs []*iadv1alpha1.IPAddress) {
	slices.SortFunc(addrs, func(a, b *iadv1alpha1.IPAddress) int { return strings.Compare(a.Name, b.Name) })
}
