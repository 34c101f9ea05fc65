package service

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/phase"
)

// observe fills the scope from the cache.
func (r *Reconciler) observe(ctx context.Context, s *scope) (phase.Result, error) {
	svc := s.svc
	s.marks = marks.Of(svc)
	s.claimName = s.marks.Claim
	var mine iadv1alpha1.IPAddressList
	if err := r.List(ctx, &mine, client.MatchingFields{index.AddressByAssociation: index.Key(svc.Namespace, svc.Name)}); err != nil {
		return phase.Next(), err
	}
	s.mine = addressPointers(mine.Items)
	sortByName(s.mine)
	if err := r.observePinnedFor(ctx, s); err != nil || s.claimName == "" {
		return phase.Next(), err
	}
	if s.claimNameProblem = marks.ClaimNameProblem(s.claimName); s.claimNameProblem != "" {
		return phase.Next(), nil
	}
	if err := r.observeClaim(ctx, s); err != nil || s.claim == nil {
		return phase.Next(), err
	}
	if err := r.observeAdmission(ctx, s); err != nil {
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
	by := s.marks.PinnedBy
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

// servedClassParams is a class this driver serves with its parsed parameters.
type servedClassParams struct {
	class  *iadv1alpha1.IPAddressClass
	params classparams.Parameters
}

// servedClasses lists, from the cache, the served classes not being
// deleted whose parameters parse (the class controller reports the others).
func (r *Reconciler) servedClasses(ctx context.Context) ([]servedClassParams, error) {
	var list iadv1alpha1.IPAddressClassList
	if err := r.List(ctx, &list); err != nil {
		return nil, err
	}
	var out []servedClassParams
	for i := range list.Items {
		c := &list.Items[i]
		if c.Spec.Provisioner != names.Provisioner || c.DeletionTimestamp != nil {
			continue
		}
		p, err := classparams.ParseParameters(c.Spec.Parameters)
		if err != nil {
			continue
		}
		out = append(out, servedClassParams{class: c, params: p})
	}
	return out, nil
}

// observeAdmission fills notAdmittedBy: the class of the claim's addresses
// does not admit the Service's namespace (classparams.Tenancy). The core
// may bind such a claim an address the driver did not draw for it (an
// Available one, a warm one); it is held, never attached anew.
func (r *Reconciler) observeAdmission(ctx context.Context, s *scope) error {
	name := ClassOf(s.addrs)
	if name == "" {
		return nil
	}
	class := &iadv1alpha1.IPAddressClass{}
	if err := r.Get(ctx, types.NamespacedName{Name: name}, class); err != nil {
		return client.IgnoreNotFound(err)
	}
	p, err := classparams.ParseParameters(class.Spec.Parameters)
	if err != nil || !p.Scoped() {
		return nil
	}
	ns := &corev1.Namespace{}
	if err := r.Get(ctx, types.NamespacedName{Name: s.svc.Namespace}, ns); client.IgnoreNotFound(err) != nil {
		return err
	}
	if !p.Admits(s.svc.Namespace, ns.Labels) {
		s.notAdmittedBy = name
	}
	return nil
}
