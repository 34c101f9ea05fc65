package claim

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/patch"
	"github.com/cozystack/metallb-iad/internal/placeholder"
	"github.com/cozystack/metallb-iad/internal/stale"
)

// WarmControllerName is the name of the controller that keeps a class's
// warm reservations filled.
const WarmControllerName = "claim-warm"

// Event reasons the warm controller records on classes.
const (
	// ReasonWarmRecorded (Normal): a warm address was recorded as an
	// Available IPAddress of the class.
	ReasonWarmRecorded = "WarmAddressRecorded"
	// ReasonWarmPoolFull (Warning): the class's ranges hold no room for
	// another warm address; the driver asks MetalLB for none.
	ReasonWarmPoolFull = "WarmPoolFull"
	// ReasonWarmDropped (Normal): a warm address outside the class's
	// edited ranges was deleted, so that the class can be rendered.
	ReasonWarmDropped = "WarmAddressDropped"
	// ReasonWarmReturned (Normal): MetalLB gave a warm placeholder an
	// address the ledger records for someone else; the driver gave it back.
	ReasonWarmReturned = "WarmAddressReturned"
)

// warmer keeps, for every served class with spec.parameters.warmAddresses
// set, that many Available IPAddresses of each family the class has ranges
// of: allocated through placeholders exactly as claims are, but recorded
// with no claimRef, so the core binds a new claim to one at once. It runs
// in the claim binary because it reuses the claim controller's allocation
// path (placeholder, pin, record, hand over).
type warmer struct {
	bootstrap.Deps
	// pauses holds, per class and family, the pause after a warm
	// placeholder gave an address back (drawPauses): warm placeholders are
	// named anew each time, but MetalLB hands the next one the same
	// address while its owner waits for it.
	pauses drawPauses
	// refills holds back a refill while a burst of claims is still taking
	// the class's warm addresses (refillQuiet).
	refills refillDelays
	// draws is the claim controller's: a warm pass holds its class's lock
	// from reading the ledger to its last draw (drawLocks).
	draws *drawLocks
	// cleared is the claim controller's memory of stale allocations
	// cleared lately, shared.
	cleared *staleMemo
}

// warmKey names one family of one class in the warm controller's pauses.
func warmKey(className string, f iadv1alpha1.IPFamily) string {
	return className + "/" + string(f)
}

// +kubebuilder:rbac:groups=local.sdn.cozystack.io,resources=ipaddresses,verbs=get;list;watch;create;delete

// Reconcile tops up or trims one class's warm addresses, one family at a
// time. Every pass re-derives what to do from the class, its addresses and
// its warm placeholders.
func (w *warmer) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	c := &iadv1alpha1.IPAddressClass{}
	if err := w.Get(ctx, req.NamespacedName, c); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		c = nil
	}
	target, ranges, served := warmTarget(c)
	if idle, err := w.idle(ctx, req.Name, target); err != nil || idle {
		return ctrl.Result{}, err
	}

	defer w.draws.lock(req.Name)()
	var addrs iadv1alpha1.IPAddressList
	if err := w.List(ctx, &addrs, client.MatchingFields{index.AddressByClass: req.Name}); err != nil {
		return ctrl.Result{}, err
	}
	phs, err := w.warmPlaceholders(ctx, req.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !served {
		// Gone, not ours, or being deleted: the warm placeholders still
		// waiting for MetalLB are orphans, and so are the warm addresses:
		// no claim can be bound to them any more, and while they exist the
		// class controller keeps the pool for them. The preconditions keep
		// an address the core bound a moment ago.
		var errs []error
		for _, ph := range phs {
			if ph.Labels[names.LabelPlaceholder] != names.PlaceholderWarm || ph.Labels[names.LabelAddress] != "" {
				continue
			}
			if err := w.Delete(ctx, ph, client.Preconditions{UID: &ph.UID, ResourceVersion: &ph.ResourceVersion}); client.IgnoreNotFound(err) != nil {
				errs = append(errs, err)
			}
		}
		for i := range addrs.Items {
			a := &addrs.Items[i]
			if !isWarm(a) || a.Labels[names.LabelWarm] != "true" {
				continue
			}
			if err := w.Delete(ctx, a, client.Preconditions{UID: &a.UID, ResourceVersion: &a.ResourceVersion}); client.IgnoreNotFound(err) != nil {
				errs = append(errs, err)
			} else if err == nil {
				log.FromContext(ctx).Info("deleted a warm address of a class that is gone", "address", a.Name)
			}
		}
		return patch.OnConflict(ctx, conflictRetry, ctrl.Result{}, errs...)
	}
	var errs []error
	var res ctrl.Result
	v4, v6 := classparams.FamilySizes(ranges)
	sizes := map[iadv1alpha1.IPFamily]float64{iadv1alpha1.FamilyIPv4: v4, iadv1alpha1.FamilyIPv6: v6}
	for _, f := range []iadv1alpha1.IPFamily{iadv1alpha1.FamilyIPv4, iadv1alpha1.FamilyIPv6} {
		size := sizes[f]
		t := target
		if size == 0 && t > 0 {
			t = 0
		}
		wait, err := w.reconcileFamily(ctx, c, req.Name, f, t, size, ranges, addrs.Items, phs)
		if err != nil {
			errs = append(errs, err)
		}
		res = patch.Sooner(res, ctrl.Result{RequeueAfter: wait})
		if wait, err = w.clearRefused(ctx, c, f, addrs.Items, phs); err != nil {
			errs = append(errs, err)
		}
		res = patch.Sooner(res, ctrl.Result{RequeueAfter: wait})
	}
	return patch.OnConflict(ctx, conflictRetry, res, errs...)
}

// idle reports whether a class has nothing for the warm controller to do:
// it asks for no warm address, and neither a warm placeholder nor an
// address the driver labelled warm is left. The warm controller hears about
// every address and placeholder of the class; for a class without warm
// reservations (the default) this keeps each of those events from copying
// the class's whole ledger.
func (w *warmer) idle(ctx context.Context, class string, target int) (bool, error) {
	if target > 0 {
		return false, nil
	}
	phs, err := w.warmPlaceholders(ctx, class)
	if err != nil || len(phs) > 0 {
		return false, err
	}
	var warm iadv1alpha1.IPAddressList
	if err := w.List(ctx, &warm, client.MatchingFields{index.WarmAddressByClass: class}, client.UnsafeDisableDeepCopy); err != nil {
		return false, err
	}
	return len(warm.Items) == 0, nil
}

// warmTarget is how many warm addresses of each family a class asks for,
// the class's ranges, and whether the driver serves the class at all (it
// exists, names this driver and is not being deleted). A served class
// whose parameters do not parse keeps what it has and asks for nothing new
// (the class controller reports why).
func warmTarget(c *iadv1alpha1.IPAddressClass) (int, []classparams.AddressRange, bool) {
	if c == nil || c.Spec.Provisioner != names.Provisioner || c.DeletionTimestamp != nil {
		return 0, nil, false
	}
	p, err := classparams.ParseParameters(c.Spec.Parameters)
	if err != nil {
		return -1, nil, true
	}
	return int(p.WarmAddresses), p.Addresses, true
}

// warmPlan is what one family of a class needs: placeholders to create,
// placeholders to record, and surplus to drop.
type warmPlan struct {
	// create is how many new warm placeholders to ask MetalLB for.
	create int
	// full is set when the class's ranges leave no room for all of them.
	full bool
	// record are warm placeholders MetalLB has given an address.
	record []*corev1.Service
	// dropPlaceholders and dropAddresses are the surplus, placeholders
	// still waiting for MetalLB first.
	dropPlaceholders []*corev1.Service
	dropAddresses    []*iadv1alpha1.IPAddress
}

// isWarm reports whether an address counts as warm: recorded from the
// class's ranges, bound to no claim, not being deleted, and Available (or
// not yet given a phase by the core).
func isWarm(a *iadv1alpha1.IPAddress) bool {
	return a.Spec.ClaimRef == nil && a.DeletionTimestamp == nil && a.Spec.Source.FromClass != nil &&
		(a.Status.Phase == "" || a.Status.Phase == iadv1alpha1.AddressAvailable)
}

// planWarm decides what family f of a class needs from its target, the
// number of addresses of f in its ranges, the ranges themselves, the
// class's addresses and its warm placeholders (any family). It is the
// whole decision.
//
// A class whose ranges were edited may still be served by a pool rendered
// from the old ones (the class controller keeps it while an address of the
// class lies outside the new ranges). Then warm addresses the driver made
// outside the new ranges are dropped, since they are nobody's and would
// keep the class from being rendered; while any address of the class lies
// outside them, nothing new is asked of MetalLB (it would allocate from the
// old ranges) and a warm placeholder given an address outside them is given
// back. Once every address is inside, a placeholder MetalLB gave an address
// outside them waits for the new pool, which makes MetalLB move it.
func planWarm(f iadv1alpha1.IPFamily, target int, size float64, ranges []classparams.AddressRange,
	addrs []iadv1alpha1.IPAddress, phs []*corev1.Service) warmPlan {
	var p warmPlan
	var warm, outside []*iadv1alpha1.IPAddress
	used, shrinking := 0, false
	for i := range addrs {
		a := &addrs[i]
		if addressFamily(a.Spec.Address) != f {
			continue
		}
		ours := isWarm(a) && a.Labels[names.LabelWarm] == "true"
		switch {
		case !inRanges(ranges, a.Spec.Address) && ours:
			outside = append(outside, a)
			shrinking = true
		case !inRanges(ranges, a.Spec.Address):
			shrinking = shrinking || a.DeletionTimestamp == nil
			used++
		default:
			used++
			if isWarm(a) {
				warm = append(warm, a)
			}
		}
	}
	var waiting, assigned, strays []*corev1.Service
	for _, ph := range phs {
		if ph.Annotations[names.AnnotationFamily] != string(f) || ph.DeletionTimestamp != nil {
			continue
		}
		switch ip := assignedIP(ph, f); {
		case ip == "":
			waiting = append(waiting, ph)
		case !inRanges(ranges, ip):
			strays = append(strays, ph)
		default:
			assigned = append(assigned, ph)
		}
	}
	p.record = assigned
	slices.SortFunc(outside, func(a, b *iadv1alpha1.IPAddress) int { return strings.Compare(a.Name, b.Name) })
	p.dropAddresses = outside
	if shrinking {
		p.dropPlaceholders = append(waiting, strays...)
		return p
	}
	have := len(warm) + len(waiting) + len(assigned) + len(strays)
	switch {
	case have < target:
		room := int(size) - used - len(waiting) - len(assigned)
		p.create = min(target-have, max(room, 0))
		p.full = p.create < target-have
	case have > target:
		surplus := have - target
		n := min(surplus, len(waiting))
		p.dropPlaceholders = waiting[:n]
		surplus -= n
		// Only addresses the driver recorded as warm are dropped (an
		// admin's static or recycled Available address is not ours to
		// delete), the last names first: the core binds the first.
		var ours []*iadv1alpha1.IPAddress
		for _, a := range warm {
			if a.Labels[names.LabelWarm] == "true" {
				ours = append(ours, a)
			}
		}
		slices.SortFunc(ours, func(a, b *iadv1alpha1.IPAddress) int { return strings.Compare(b.Name, a.Name) })
		p.dropAddresses = ours[:min(surplus, len(ours))]
	}
	return p
}

// inRanges reports whether ip, in the ledger's form, lies in one of the
// ranges.
func inRanges(ranges []classparams.AddressRange, ip string) bool {
	a, err := names.ParseAddress(ip)
	return err == nil && classparams.Contains(ranges, a)
}

func (w *warmer) reconcileFamily(ctx context.Context, c *iadv1alpha1.IPAddressClass, className string, f iadv1alpha1.IPFamily,
	target int, size float64, ranges []classparams.AddressRange, addrs []iadv1alpha1.IPAddress, phs []*corev1.Service) (time.Duration, error) {
	if target < 0 {
		return 0, nil // parameters that do not parse: change nothing
	}
	// Claims' placeholders take room too until their address is recorded.
	drawn, err := drawnPlaceholders(ctx, w.Client, w.PlaceholderNamespace, className)
	if err != nil {
		return 0, err
	}
	claims := slices.DeleteFunc(drawn, func(ph corev1.Service) bool {
		return ph.Labels[names.LabelPlaceholder] != names.PlaceholderAllocation
	})
	p := planWarm(f, target, size-float64(unrecorded(claims, f, addrs)), ranges, addrs, phs)
	for _, ph := range p.record {
		if err := w.record(ctx, c, className, f, ph); err != nil {
			return 0, err
		}
	}
	for _, ph := range p.dropPlaceholders {
		if err := w.Delete(ctx, ph, client.Preconditions{UID: &ph.UID, ResourceVersion: &ph.ResourceVersion}); client.IgnoreNotFound(err) != nil {
			return 0, fmt.Errorf("delete surplus warm placeholder %s: %w", ph.Name, err)
		}
	}
	for _, a := range p.dropAddresses {
		// The precondition makes sure the core has not bound it meanwhile.
		if err := w.Delete(ctx, a, client.Preconditions{UID: &a.UID, ResourceVersion: &a.ResourceVersion}); client.IgnoreNotFound(err) != nil {
			return 0, fmt.Errorf("delete surplus warm address %s: %w", a.Name, err)
		}
		if inRanges(ranges, a.Spec.Address) {
			log.FromContext(ctx).Info("deleted surplus warm address", "ipaddress", a.Name, "class", className)
			continue
		}
		log.FromContext(ctx).Info("deleted a warm address outside the class's ranges", "ipaddress", a.Name, "class", className)
		if c != nil {
			w.Recorder.Eventf(c, corev1.EventTypeNormal, ReasonWarmDropped,
				"Deleted warm address %s (IPAddress %s, bound to no claim): the class's addresses no longer contain it", a.Spec.Address, a.Name)
		}
	}
	if p.full && c != nil {
		w.Recorder.Eventf(c, corev1.EventTypeWarning, ReasonWarmPoolFull,
			"The class's %s ranges have no room for the %d warm addresses asked for; the driver keeps what fits and asks MetalLB for no more", f, target)
	}
	if p.create > 0 {
		// While an address of the ledger is unheld in MetalLB (a handoff
		// or a hold being re-armed), MetalLB would hand it to a new warm
		// placeholder, only for it to be given back: wait until it is held
		// again (an IPAddress or placeholder change brings the class back).
		if a := unsettledAddress(addrs, f, heldByPlaceholder(ctx, w.Client, w.PlaceholderNamespace)); a != nil {
			log.FromContext(ctx).V(1).Info("an address of the ledger is not held in MetalLB right now; not warming yet",
				"class", className, "family", f, "ipaddress", a.Name)
			return 0, nil
		}
		// After a give-back, MetalLB would hand the next warm placeholder
		// the same address while its owner still waits for it.
		if left := w.pauses.left(warmKey(className, f), time.Now()); left > 0 {
			log.FromContext(ctx).V(1).Info("pausing after a give-back before warming again", "class", className, "family", f, "for", left)
			return left, nil
		}
		// Claims may still be taking warm addresses: let the burst be bound
		// first.
		if left := w.refills.wait(warmKey(className, f), p.create, time.Now()); left > 0 {
			log.FromContext(ctx).V(1).Info("warm addresses were taken a moment ago; refilling once the burst has passed",
				"class", className, "family", f, "missing", p.create, "in", left)
			return left, nil
		}
	}
	for range p.create {
		ph := renderWarmPlaceholder(w.PlaceholderNamespace, className, f)
		if err := w.Create(ctx, ph); err != nil {
			return 0, fmt.Errorf("create warm placeholder for class %s: %w", className, err)
		}
		log.FromContext(ctx).V(1).Info("created warm placeholder", "class", className, "family", f, "placeholder", ph.Name)
		if err := patch.WaitForCache(ctx, w.Client, w.APIReader, ph, nil, cacheWait); err != nil {
			return 0, err
		}
	}
	return 0, nil
}

// record turns a warm placeholder MetalLB has given an address into the
// hold placeholder of an Available IPAddress, in the same idempotent steps
// as a claim's: label and pin (with the address's sharing key), create the
// IPAddress with no claimRef, hand the placeholder over.
func (w *warmer) record(ctx context.Context, c *iadv1alpha1.IPAddressClass, className string, f iadv1alpha1.IPFamily, ph *corev1.Service) error {
	ip := assignedIP(ph, f)
	addr, _ := names.ParseAddress(ip)
	addrName, err := names.AddressName(addr)
	if err != nil {
		return err
	}

	// Ask the ledger before anything is written on the placeholder. An
	// address recorded for someone else (an attached address is unheld
	// for a moment during a gap handoff, and MetalLB may hand it out) is
	// given back at once; one being torn down is waited for.
	existing, err := w.ledgerEntry(ctx, addrName)
	if err != nil {
		return err
	}
	if existing != nil {
		switch {
		case existing.DeletionTimestamp != nil:
			log.FromContext(ctx).V(1).Info("the address MetalLB gave a warm placeholder is still being torn down; waiting",
				"placeholder", ph.Name, "ipaddress", existing.Name)
			return nil
		case !isOurWarm(existing, className):
			return w.giveBack(ctx, c, f, ph, ip, existing)
		}
	}

	a := renderWarmAddress(c, ip, addrName)
	if pin := ph.Annotations[names.MetalLBLoadBalancerIPs]; pin != "" && !slices.Equal(names.SplitIPs(pin), []string{ip}) {
		return nil // pinned elsewhere: MetalLB has not caught up
	}
	// Labelled and pinned, without a sharing key (as a claim's allocation
	// placeholder): the claim the address is bound to later gets a key on
	// its hold only for a shared handoff.
	if ph.Labels[names.LabelAddress] != addrName || ph.Annotations[names.MetalLBLoadBalancerIPs] != ip {
		if err := patch.Meta(ctx, w, ph, func() {
			ph.Labels[names.LabelAddress] = addrName
			ph.Annotations[names.MetalLBLoadBalancerIPs] = ip
		}); err != nil {
			return fmt.Errorf("pin warm placeholder %s to %s: %w", ph.Name, ip, err)
		}
	}

	if existing == nil {
		if err := w.Create(ctx, a); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return nil // someone was faster; the next pass asks the ledger again
			}
			return fmt.Errorf("create warm IPAddress %s: %w", addrName, err)
		}
		existing = a
		if err := patch.WaitForCache(ctx, w.Client, w.APIReader, a, nil, cacheWait); err != nil {
			return err
		}
		w.Recorder.Eventf(c, corev1.EventTypeNormal, ReasonWarmRecorded, "Recorded warm %s address %s as Available IPAddress %s", f, ip, addrName)
		allocationsTotal.WithLabelValues(className, string(f), resultWarm).Inc()
	}

	if err := patch.Meta(ctx, w, ph, func() {
		if !ownedByAddress(ph, existing.Name) {
			ph.OwnerReferences = append(ph.OwnerReferences, placeholder.OwnerRef(existing))
		}
		ph.Labels[names.LabelPlaceholder] = names.PlaceholderHold
	}); err != nil {
		return fmt.Errorf("hand warm placeholder %s over to IPAddress %s: %w", ph.Name, existing.Name, err)
	}
	log.FromContext(ctx).Info("recorded warm address", "class", className, "family", f, "ip", ip, "ipaddress", existing.Name)
	return nil
}

// isOurWarm reports whether an existing IPAddress is a warm address this
// controller recorded for the class and nobody has taken since: only then
// may a warm placeholder become its hold.
func isOurWarm(a *iadv1alpha1.IPAddress, className string) bool {
	return a.Labels[names.LabelWarm] == "true" && a.Spec.ClassName == className && a.Spec.ClaimRef == nil &&
		a.Status.AssociatedTo == nil && a.Spec.Source.FromClass != nil
}

// ledgerEntry is the IPAddress named addrName, nil when there is none. A
// miss in the cache is confirmed with the API server, so a lagging cache
// never lets a warm placeholder take an address the ledger records.
func (w *warmer) ledgerEntry(ctx context.Context, addrName string) (*iadv1alpha1.IPAddress, error) {
	a := &iadv1alpha1.IPAddress{}
	err := w.Get(ctx, types.NamespacedName{Name: addrName}, a)
	if apierrors.IsNotFound(err) {
		err = w.APIReader.Get(ctx, types.NamespacedName{Name: addrName}, a)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return a, nil
}

// giveBack gives back an address a warm placeholder was given that the
// ledger records for someone else (giveBack), and tells the class.
func (w *warmer) giveBack(ctx context.Context, c *iadv1alpha1.IPAddressClass, f iadv1alpha1.IPFamily, ph *corev1.Service, ip string, entry *iadv1alpha1.IPAddress) error {
	if gave, err := giveBack(ctx, w, c.Name, f, ph, ip, entry); err != nil || !gave {
		return err
	}
	w.pauses.gaveBack(warmKey(c.Name, f), ip, time.Now())
	w.Recorder.Eventf(c, corev1.EventTypeNormal, ReasonWarmReturned,
		"MetalLB gave a warm placeholder %s address %s, which IPAddress %s records (%s); the driver gave it back and allocates another",
		f, ip, entry.Name, strings.TrimPrefix(describeBinding(entry), "is "))
	return nil
}

// renderWarmPlaceholder is a warm placeholder: an allocation placeholder
// of no claim, drawing from the class pool, named by the API server.
func renderWarmPlaceholder(namespace, className string, f iadv1alpha1.IPFamily) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:    namespace,
			GenerateName: "warm-" + strings.ToLower(string(f)) + "-",
			Labels:       map[string]string{names.LabelPlaceholder: names.PlaceholderWarm, names.LabelGrant: className},
			Annotations: map[string]string{
				names.MetalLBAddressPool: names.PoolName(className),
				names.AnnotationFamily:   string(f),
				names.AnnotationClass:    className,
			},
		},
		Spec: placeholder.Spec(serviceFamily(f)),
	}
}

// renderWarmAddress is the IPAddress recording a warm address: no
// claimRef (the core makes it Available and binds it to the next claim),
// the class and its reclaim policy, source fromClass, the teardown
// finalizer.
func renderWarmAddress(c *iadv1alpha1.IPAddressClass, ip, addrName string) *iadv1alpha1.IPAddress {
	return &iadv1alpha1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{
			Name:       addrName,
			Labels:     map[string]string{names.LabelWarm: "true"},
			Finalizers: []string{names.Finalizer},
		},
		Spec: iadv1alpha1.IPAddressSpec{
			Address:       ip,
			ClassName:     c.Name,
			ReclaimPolicy: reclaimPolicy(c),
			Source:        iadv1alpha1.IPAddressSource{FromClass: &iadv1alpha1.FromClassSource{}},
		},
	}
}

// warmPlaceholders lists the warm placeholders of a class that are not
// handed over yet.
func (w *warmer) warmPlaceholders(ctx context.Context, className string) ([]*corev1.Service, error) {
	var list corev1.ServiceList
	if err := w.List(ctx, &list, client.InNamespace(w.PlaceholderNamespace),
		client.MatchingFields{index.WarmPlaceholderByClass: className}); err != nil {
		return nil, err
	}
	out := make([]*corev1.Service, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out, nil
}

func (w *warmer) setupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	toClass := func(_ context.Context, o client.Object) []reconcile.Request {
		var name string
		switch v := o.(type) {
		case *iadv1alpha1.IPAddress:
			name = v.Spec.ClassName
		case *corev1.Service:
			if v.Namespace != w.PlaceholderNamespace {
				return nil
			}
			name = v.Annotations[names.AnnotationClass]
		}
		if name == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: name}}}
	}
	// MetalLB refusing a warm placeholder changes nothing on the Service,
	// only an Event (the cache holds its AllocationFailed Events in the
	// placeholder namespace): the class looks at the refusal then
	// (clearRefused).
	refusal := func(ctx context.Context, o client.Object) []reconcile.Request {
		ph := eventPlaceholder(ctx, w, w.PlaceholderNamespace, o)
		if ph == nil || ph.Labels[names.LabelPlaceholder] != names.PlaceholderWarm {
			return nil
		}
		return toClass(ctx, ph)
	}
	ours := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.(*iadv1alpha1.IPAddressClass).Spec.Provisioner == names.Provisioner
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named(WarmControllerName).
		For(&iadv1alpha1.IPAddressClass{}, builder.WithPredicates(ours)).
		Watches(&iadv1alpha1.IPAddress{}, handler.EnqueueRequestsFromMapFunc(toClass)).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(toClass)).
		Watches(&corev1.Event{}, handler.EnqueueRequestsFromMapFunc(refusal)).
		WithOptions(opts).
		Complete(w)
}

// clearRefused looks for stale allocations of the class's free addresses
// in MetalLB (staleClearer) when MetalLB refused a warm placeholder of
// family f for lack of room. The caller holds the class's draw lock.
func (w *warmer) clearRefused(ctx context.Context, c *iadv1alpha1.IPAddressClass, f iadv1alpha1.IPFamily,
	addrs []iadv1alpha1.IPAddress, phs []*corev1.Service) (time.Duration, error) {
	if c == nil {
		return 0, nil
	}
	var since time.Time
	var refused []*corev1.Service
	for _, ph := range phs {
		if ph.Annotations[names.AnnotationFamily] != string(f) || ph.DeletionTimestamp != nil || assignedIP(ph, f) != "" {
			continue
		}
		var evs corev1.EventList
		if err := w.List(ctx, &evs, client.InNamespace(w.PlaceholderNamespace),
			client.MatchingFields{index.EventByInvolvedUID: string(ph.UID)}); err != nil {
			return 0, err
		}
		failure := latestAllocationFailure(evs.Items)
		if failure == nil {
			continue
		}
		if reason, _ := allocationFailure(f, c.Name, failure.Message); reason != ReasonPoolExhausted {
			continue
		}
		refused = append(refused, ph)
		if t := stale.EventFirstTime(failure); since.IsZero() || t.Before(since) {
			since = t
		}
	}
	if since.IsZero() {
		return 0, nil
	}
	drawn, err := drawnPlaceholders(ctx, w.Client, w.PlaceholderNamespace, c.Name)
	if err != nil {
		return 0, err
	}
	return (&staleClearer{Deps: w.Deps, cleared: w.cleared}).clearFree(ctx, c, f, addrs, unrecorded(drawn, f, addrs), since, refused)
}
