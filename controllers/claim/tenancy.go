package claim

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim/draw"
	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/phase"
)

// Tenancy: a class says which namespaces may claim from it and how many of
// its addresses one namespace may hold (classparams.Tenancy). The claim
// controller draws nothing for a claim its class does not admit, and
// nothing past the bound. What a claim holds already it keeps: a namespace
// that stops being admitted, or a class whose bound is lowered, loses no
// address.

// checkAdmitted ends the pass of a claim that still misses an address and
// whose class does not admit its namespace, said on the claim.
func (r *Reconciler) checkAdmitted(ctx context.Context, s *scope) (phase.Result, error) {
	missing := false
	for _, f := range s.claim.Spec.Family.Families() {
		missing = missing || s.unbound[f]
	}
	if !missing {
		return phase.Next(), nil
	}
	t, admitted, err := admission(ctx, r.Client, s.class, s.claim.Namespace)
	s.tenancy = t
	if err != nil || admitted {
		r.report(s.claim, "tenancy", "", "", "")
		return phase.Next(), err
	}
	log.FromContext(ctx).V(1).Info("the class does not admit the claim's namespace", "class", s.class.Name)
	r.report(s.claim, "tenancy", corev1.EventTypeWarning, ReasonNamespaceNotAdmitted, msgNamespaceNotAdmitted(s.class.Name, s.claim.Namespace, t))
	r.forget(s.key)
	return phase.HaltFor("the class to admit the claim's namespace", 0), nil
}

// admission reads the class's tenancy and whether it admits namespace ns,
// from the cache. A class whose parameters do not parse names no tenancy
// to judge by: the class controller says why on the class, and the claim
// goes on as it did before tenancy (MetalLB has no pool for it).
func admission(ctx context.Context, c client.Reader, class *iadv1alpha1.IPAddressClass, ns string) (classparams.Tenancy, bool, error) {
	p, err := classparams.ParseParameters(class.Spec.Parameters)
	if err != nil {
		return classparams.Tenancy{}, true, nil
	}
	if !p.Scoped() {
		return p.Tenancy, true, nil
	}
	namespace := &corev1.Namespace{}
	if err := c.Get(ctx, types.NamespacedName{Name: ns}, namespace); err != nil {
		return p.Tenancy, false, client.IgnoreNotFound(err)
	}
	return p.Tenancy, p.Admits(ns, namespace.Labels), nil
}

// namespaceBound holds back a draw of the scope's claim that would pass
// the class's bound on its namespace (s.tenancy, read by checkAdmitted).
// It runs under the class's lock, with the book read before the
// placeholders and the ledger (classDraws), so that a draw in flight is
// counted once and none is missed.
func (r *Reconciler) namespaceBound(ctx context.Context, s *scope, book *draw.Book, now time.Time) (drawDecision, error) {
	bound := s.tenancy.MaxAddressesPerNamespace
	if bound == 0 {
		return drawDecision{verdict: drawNow}, nil
	}
	inBook := book.Draws(now)
	phs, err := draw.DrawnPlaceholders(ctx, r.Client, r.PlaceholderNamespace, s.class.Name)
	if err != nil {
		return drawDecision{}, err
	}
	var addrs iadv1alpha1.IPAddressList
	if err := r.List(ctx, &addrs, client.MatchingFields{index.AddressByClassNamespace: index.Key(s.class.Name, s.claim.Namespace)},
		client.UnsafeDisableDeepCopy); err != nil {
		return drawDecision{}, err
	}
	others := namespaceHolds(s.claim.Namespace, s.claim.Name, addrs.Items, phs, inBook, now)
	if overBound(others, len(s.claim.Spec.Family.Families()), bound) {
		return drawDecision{verdict: drawNamespaceFull, used: others, size: float64(bound)}, nil
	}
	return drawDecision{verdict: drawNow}, nil
}

// namespaceToClaims maps a namespace to its claims that miss an address:
// a change of its labels may admit them.
func (r *Reconciler) namespaceToClaims(ctx context.Context, o client.Object) []reconcile.Request {
	var claims iadv1alpha1.IPAddressClaimList
	if err := r.List(ctx, &claims, client.InNamespace(o.GetName()), client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "cannot list the namespace's claims", "namespace", o.GetName())
		return nil
	}
	var out []reconcile.Request
	for i := range claims.Items {
		if c := &claims.Items[i]; c.Status.Phase != iadv1alpha1.ClaimBound {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(c)})
		}
	}
	return out
}
