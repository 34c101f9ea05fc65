package service

import (
	"context"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/phase"
)

// detectConflicts looks every ingress IP of the Service up in the ledger
// (docs/design.md, section 7). An address of a served class whose binding
// does not authorize the Service goes to phase Conflict; an IP of a served
// class's ranges that no IPAddress records was taken without a claim. Both
// are reported as unauthorized holdings (reportUnauthorized). Placeholders
// are exempt.
func (r *Reconciler) detectConflicts(ctx context.Context, s *scope) (phase.Result, error) {
	svc := s.svc
	if svc.DeletionTimestamp != nil || marks.Exempt(svc, r.PlaceholderNamespace) {
		r.holders.set(s.key, nil)
		return phase.Next(), nil
	}
	var grabs []grab
	var classes []classRanges
	for _, ip := range marks.IngressIPs(svc) {
		var hits iadv1alpha1.IPAddressList
		if err := r.List(ctx, &hits, client.MatchingFields{index.AddressByIP: ip}); err != nil {
			return phase.Next(), err
		}
		recorded := false
		for i := range hits.Items {
			a := &hits.Items[i]
			ours, err := r.served(ctx, a)
			if err != nil {
				return phase.Next(), err
			}
			if !ours {
				continue
			}
			recorded = true
			if !conflicting(svc, a) {
				continue
			}
			grabs = append(grabs, grab{Class: a.Spec.ClassName, IP: ip, Address: a.Name})
			r.markConflict(ctx, s, a, ip)
		}
		if recorded {
			continue
		}
		if classes == nil {
			var err error
			if classes, err = r.servedClassRanges(ctx); err != nil {
				return phase.Next(), err
			}
		}
		if c := classOfIP(classes, ip); c != "" {
			grabs = append(grabs, grab{Class: c, IP: ip})
		}
	}
	r.reportUnauthorized(ctx, svc, grabs)
	return phase.Next(), nil
}

// markConflict puts an address held by an unauthorized Service in phase
// Conflict, with Events on both once written; one already in Conflict is
// left as it is.
func (r *Reconciler) markConflict(ctx context.Context, s *scope, a *iadv1alpha1.IPAddress, ip string) {
	if a.Status.Phase == iadv1alpha1.AddressConflict && conditions.IsTrue(a.Status.Conditions, conditions.Conflict) {
		return
	}
	svc := s.svc
	// Written when the pass ends (endPass), or with the attach's
	// association if it flushes first: no later write of the pass rests
	// on the Conflict, and its Events wait for the write as before.
	s.status.set(a, func(st *iadv1alpha1.IPAddressStatus) {
		st.Phase = iadv1alpha1.AddressConflict
		conditions.Set(&st.Conditions, conditions.Conflict, metav1.ConditionTrue,
			conditions.ReasonUnauthorizedHolder, msgConflict(svc, ip), a.Generation)
	}, func() {
		log.FromContext(ctx).Info("address conflict", "address", a.Name, "ip", ip)
		r.Recorder.Event(svc, corev1.EventTypeWarning, ReasonAddressConflict, msgConflictService(ip, a.Name, a.Spec.ClaimRef))
		r.Recorder.Event(a, corev1.EventTypeWarning, ReasonAddressConflict, msgConflict(svc, ip))
	})
}

// reportUnauthorized records the Service's unauthorized holdings and
// reports each new one on the Service and on the class.
func (r *Reconciler) reportUnauthorized(ctx context.Context, svc *corev1.Service, grabs []grab) {
	for _, g := range r.holders.set(client.ObjectKeyFromObject(svc), grabs) {
		log.FromContext(ctx).Info("a Service holds a class address the ledger does not authorize", "class", g.Class, "ip", g.IP, "ipaddress", g.Address)
		r.Recorder.Event(svc, corev1.EventTypeWarning, ReasonUnclaimedAddress, msgUnclaimedService(g))
		cls := &iadv1alpha1.IPAddressClass{}
		cls.Name = g.Class
		if err := r.Get(ctx, types.NamespacedName{Name: g.Class}, cls); err == nil {
			r.Recorder.Event(cls, corev1.EventTypeWarning, ReasonUnclaimedAddress, msgUnclaimedClass(svc, g))
		}
	}
}

// servedClassRanges are the ranges of servedClasses, by class name.
func (r *Reconciler) servedClassRanges(ctx context.Context) ([]classRanges, error) {
	served, err := r.servedClasses(ctx)
	if err != nil {
		return nil, err
	}
	var out []classRanges
	for _, sc := range served {
		out = append(out, classRanges{name: sc.class.Name, ranges: sc.params.Addresses})
	}
	slices.SortFunc(out, func(a, b classRanges) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// unauthorized remembers the unauthorized holdings seen per Service, for
// the gauge and to report each new one once. Decisions never read it.
type unauthorized struct {
	mu    sync.Mutex
	bySvc map[types.NamespacedName]map[grab]bool
}

func newUnauthorized() *unauthorized {
	return &unauthorized{bySvc: map[types.NamespacedName]map[grab]bool{}}
}

// set records the Service's current unauthorized holdings and returns the
// ones not seen before.
func (u *unauthorized) set(key types.NamespacedName, now []grab) []grab {
	u.mu.Lock()
	defer u.mu.Unlock()
	old := u.bySvc[key]
	var fresh []grab
	cur := map[grab]bool{}
	for _, g := range now {
		cur[g] = true
		if !old[g] {
			fresh = append(fresh, g)
		}
	}
	if len(cur) == 0 {
		delete(u.bySvc, key)
	} else {
		u.bySvc[key] = cur
	}
	u.refresh(old, cur)
	return fresh
}

// refresh recomputes the gauge of every class whose holders changed.
func (u *unauthorized) refresh(old, cur map[grab]bool) {
	classes := map[string]bool{}
	for g := range old {
		classes[g.Class] = true
	}
	for g := range cur {
		classes[g.Class] = true
	}
	for c := range classes {
		n := 0
		for _, gs := range u.bySvc {
			for g := range gs {
				if g.Class == c {
					n++
					break
				}
			}
		}
		unauthorizedHolders.WithLabelValues(c).Set(float64(n))
	}
}
