package service

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
)

var unauthorizedHolders = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "metallb_iad_unauthorized_holders",
	Help: "Services holding an address of a class's ranges (status.loadBalancer.ingress) that the ledger does not authorize: no IPAddress records it, or the IPAddress's binding does not name the Service.",
}, []string{"class"})

func init() { metrics.Registry.MustRegister(unauthorizedHolders) }

// grab is one unauthorized holding: an IP of a class held by a Service.
type grab struct {
	Class string
	IP    string
	// Address is the IPAddress recording the IP, "" when none does.
	Address string
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

// classRanges is a served class's name and parsed ranges.
type classRanges struct {
	name   string
	ranges []classparams.AddressRange
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

// ClassOfIP is the class among classes whose ranges contain ip; "" when none.
func classOfIP(classes []classRanges, ip string) string {
	addr, err := names.ParseAddress(ip)
	if err != nil {
		return ""
	}
	for _, c := range classes {
		for _, rg := range c.ranges {
			if rg.Start.Is4() == addr.Is4() && rg.Start.Compare(addr) <= 0 && addr.Compare(rg.End) <= 0 {
				return c.name
			}
		}
	}
	return ""
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

// servicesForClass maps a class to the Services holding an address of its
// ranges, so a class created or widened after the fact reports them. It
// lists every cached Service: class changes are rare.
func (r *Reconciler) servicesForClass(ctx context.Context, o client.Object) []reconcile.Request {
	c, ok := o.(*iadv1alpha1.IPAddressClass)
	if !ok || c.Spec.Provisioner != names.Provisioner {
		return nil
	}
	p, err := classparams.ParseParameters(c.Spec.Parameters)
	if err != nil {
		return nil
	}
	classes := []classRanges{{name: c.Name, ranges: p.Addresses}}
	var list corev1.ServiceList
	if err := r.List(ctx, &list); err != nil {
		log.FromContext(ctx).Error(err, "cannot list Services")
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		s := &list.Items[i]
		for _, ip := range marks.IngressIPs(s) {
			if classOfIP(classes, ip) != "" {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(s)})
				break
			}
		}
	}
	return reqs
}
