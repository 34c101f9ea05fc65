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
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/phase"
)

// scope is what one pass knows about a Service; the observe phase fills
// everything but svc and key.
type scope struct {
	svc       *corev1.Service
	key       types.NamespacedName
	claimName string
	// claim is nil when it does not exist.
	claim *iadv1alpha1.IPAddressClaim
	// addrs are the claim's addresses of served classes, bound to its uid,
	// not being deleted, one per family (OnePerFamily), by name.
	addrs   []*iadv1alpha1.IPAddress
	foreign int
	// mine are the addresses associated with the Service, by name.
	mine []*iadv1alpha1.IPAddress
	// pinnedFor are the served addresses, deleted ones included, of the
	// claim the pinned-by marker names whose IP the pin names or the
	// Service holds: a Service detached in a shared handoff still holds
	// them once they are no longer associated with it.
	pinnedFor []*iadv1alpha1.IPAddress
	// otherHolder holds otherAddress, one of addrs, by association or
	// attach grant; otherDetaching says it is on its way out.
	otherHolder    string
	otherAddress   *iadv1alpha1.IPAddress
	otherDetaching bool
}

// observe fills the scope from the cache.
func (r *Reconciler) observe(ctx context.Context, s *scope) (phase.Result, error) {
	svc := s.svc
	s.claimName = marks.Of(svc).Claim
	var mine iadv1alpha1.IPAddressList
	if err := r.List(ctx, &mine, client.MatchingFields{index.AddressByAssociation: index.Key(svc.Namespace, svc.Name)}); err != nil {
		return phase.Next(), err
	}
	s.mine = addressPointers(mine.Items)
	sortByName(s.mine)
	if err := r.observePinnedFor(ctx, s); err != nil || s.claimName == "" {
		return phase.Next(), err
	}
	if err := r.observeClaim(ctx, s); err != nil || s.claim == nil {
		return phase.Next(), err
	}
	if err := r.observeAssociated(ctx, s); err != nil || s.otherHolder != "" {
		return phase.Next(), err
	}
	return phase.Next(), r.observeAttachGrant(ctx, s)
}

// observeClaim fills claim, addrs and foreign.
func (r *Reconciler) observeClaim(ctx context.Context, s *scope) error {
	claim := &iadv1alpha1.IPAddressClaim{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: s.svc.Namespace, Name: s.claimName}, claim); err != nil {
		return client.IgnoreNotFound(err)
	}
	s.claim = claim
	var bound iadv1alpha1.IPAddressList
	if err := r.List(ctx, &bound, client.MatchingFields{index.AddressByClaim: index.Key(claim.Namespace, claim.Name)}); err != nil {
		return err
	}
	for _, a := range boundTo(claim, bound.Items) {
		ours, err := r.served(ctx, a)
		if err != nil {
			return err
		}
		if !ours {
			s.foreign++
			continue
		}
		s.addrs = append(s.addrs, a)
	}
	if kept := OnePerFamily(s.addrs, s.svc); len(kept) < len(s.addrs) {
		log.FromContext(ctx).V(1).Info("the claim holds more than one address of a family; the Service gets one of each",
			"claim", s.claimName, "ips", addressIPs(kept))
		s.addrs = kept
	}
	sortByName(s.addrs)
	return nil
}

// observeAssociated fills otherHolder from the first of addrs associated
// with another workload; an association naming a Service that is gone is
// stale, ours to take over.
func (r *Reconciler) observeAssociated(ctx context.Context, s *scope) error {
	for _, a := range s.addrs {
		at := a.Status.AssociatedTo
		if at == nil || AssociatedWith(a, s.svc.Namespace, s.svc.Name) {
			continue
		}
		var other *corev1.Service
		if at.Kind == "Service" {
			other = &corev1.Service{}
			err := r.Get(ctx, types.NamespacedName{Namespace: at.Namespace, Name: at.Name}, other)
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return err
			}
		}
		s.otherHolder, s.otherDetaching = associatedHolder(at, other, s.svc.Namespace, s.claimName)
		s.otherAddress = a
		return nil
	}
	return nil
}

// observeAttachGrant fills otherHolder from the attach grants on addrs,
// when none is associated elsewhere (grantedTo, grantHeld).
func (r *Reconciler) observeAttachGrant(ctx context.Context, s *scope) error {
	for _, a := range s.addrs {
		key, ok := grantedTo(a, s.svc)
		if !ok {
			continue
		}
		other, err := r.liveService(ctx, key)
		if err != nil {
			return err
		}
		if other == nil {
			continue
		}
		if held, detaching := grantHeld(other, s.claimName); held {
			s.otherHolder, s.otherAddress, s.otherDetaching = marks.Attaching(a), a, detaching
			return nil
		}
	}
	return nil
}

// observePinnedFor fills pinnedFor.
func (r *Reconciler) observePinnedFor(ctx context.Context, s *scope) error {
	by := marks.Of(s.svc).PinnedBy
	if by == "" {
		return nil
	}
	want := pinnedIPs(s.svc)
	var list iadv1alpha1.IPAddressList
	if err := r.List(ctx, &list, client.MatchingFields{index.AddressByClaim: index.Key(s.svc.Namespace, by)}); err != nil {
		return err
	}
	for i := range list.Items {
		a := &list.Items[i]
		// An address being deleted stays in: its teardown takes it back
		// from the Service through the same release sequence.
		if ip, err := names.ParseAddress(a.Spec.Address); err != nil || !want[ip.String()] {
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

// liveService reads a Service from the cache and, when the cache does not
// have it, from the API server (it may have been created a moment ago);
// nil when it does not exist.
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

// served reads the address's class from the cache for marks.Served.
func (r *Reconciler) served(ctx context.Context, a *iadv1alpha1.IPAddress) (bool, error) {
	class := &iadv1alpha1.IPAddressClass{}
	if err := r.Get(ctx, types.NamespacedName{Name: a.Spec.ClassName}, class); err != nil {
		if !apierrors.IsNotFound(err) {
			return false, err
		}
		class = nil
	}
	return marks.Served(a, class), nil
}

// boundTo are the addresses of items bound to the claim's uid and not
// being deleted.
func boundTo(claim *iadv1alpha1.IPAddressClaim, items []iadv1alpha1.IPAddress) []*iadv1alpha1.IPAddress {
	var out []*iadv1alpha1.IPAddress
	for i := range items {
		a := &items[i]
		if a.Spec.ClaimRef.UID == string(claim.UID) && a.DeletionTimestamp == nil {
			out = append(out, a)
		}
	}
	return out
}

// associatedHolder names the workload at, which an address of the claim
// is associated with; other is that Service (nil for another kind). It is
// on its way out when it is being deleted or no longer names the claim.
func associatedHolder(at *iadv1alpha1.WorkloadReference, other *corev1.Service, namespace, claim string) (holder string, detaching bool) {
	if at.Kind != "Service" {
		return fmt.Sprintf("%s %s/%s", at.Kind, at.Namespace, at.Name), false
	}
	return at.Namespace + "/" + at.Name, other.DeletionTimestamp != nil ||
		other.Namespace != namespace || marks.Of(other).Claim != claim
}

// grantedTo is the other Service an attach grant on a (not associated
// with svc) names; a grant can only name a Service of the claim's
// namespace.
func grantedTo(a *iadv1alpha1.IPAddress, svc *corev1.Service) (types.NamespacedName, bool) {
	other, ok := marks.AttachingService(a)
	if !ok || other == client.ObjectKeyFromObject(svc) || AssociatedWith(a, svc.Namespace, svc.Name) || other.Namespace != svc.Namespace {
		return types.NamespacedName{}, false
	}
	return other, true
}

// grantHeld reports whether the Service a grant names still holds it: it
// asks for the claim, or is on its way out (detaching) while it still
// carries the driver's pin for it. Otherwise the grant is free to take over.
func grantHeld(other *corev1.Service, claim string) (held, detaching bool) {
	m := marks.Of(other)
	asks := other.DeletionTimestamp == nil && m.Claim == claim
	pinned := m.PinnedBy == claim
	return asks || pinned, !asks
}

// pinnedIPs are the IPs the Service's pin names or its ingress shows.
func pinnedIPs(svc *corev1.Service) map[string]bool {
	want := map[string]bool{}
	for _, ip := range marks.Of(svc).PinIPs() {
		want[ip] = true
	}
	for _, ip := range marks.IngressIPs(svc) {
		want[ip] = true
	}
	return want
}

// situation reduces the scope to the decision's inputs.
func (s *scope) situation() Situation {
	sit := Situation{
		Claim:          s.claimName,
		Deleting:       s.svc.DeletionTimestamp != nil,
		LoadBalancer:   s.svc.Spec.Type == corev1.ServiceTypeLoadBalancer,
		OtherHolder:    s.otherHolder,
		OtherDetaching: s.otherDetaching,
		HandPin:        marks.Of(s.svc).HandPin(),
		Desired:        marks.PinValue(addressIPs(s.addrs)),
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

// pinClaim is the claim the Service's pin is for: its pinned-by marker, or
// else the claim its annotation names.
func (s *scope) pinClaim() string {
	if by := marks.Of(s.svc).PinnedBy; by != "" {
		return by
	}
	return s.claimName
}

// givingUp reports whether addrs are given up rather than kept: one is
// being deleted, or the claim the pin is for is gone or being deleted and
// one of them goes with it (reclaimPolicy Delete; under Retain they stay
// held, Released, and are detached as usual).
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

func addressPointers(items []iadv1alpha1.IPAddress) []*iadv1alpha1.IPAddress {
	var out []*iadv1alpha1.IPAddress
	for i := range items {
		out = append(out, &items[i])
	}
	return out
}

func containsAddress(list []*iadv1alpha1.IPAddress, a *iadv1alpha1.IPAddress) bool {
	return slices.ContainsFunc(list, func(b *iadv1alpha1.IPAddress) bool { return b.UID == a.UID })
}

func sortByName(addrs []*iadv1alpha1.IPAddress) {
	slices.SortFunc(addrs, func(a, b *iadv1alpha1.IPAddress) int { return strings.Compare(a.Name, b.Name) })
}
