package service

import (
	"context"
	"errors"
	"maps"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/binding"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/patch"
)

// importsTotal counts the outcomes of imports per class: addresses
// imported, addresses skipped (each skipped Service once per reason) and
// failed import steps.
var importsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "metallb_iad_imports_total",
	Help: "Addresses MetalLB had assigned to plain Services that the service controller imported into generated claims (result=imported), left alone with a Warning Event (result=skipped, once per Service and reason) or failed to import in a pass (result=failed, retried), per class with adoptExisting.",
}, []string{"class", "result"})

func init() { metrics.Registry.MustRegister(importsTotal) }

// importOutcomes remembers, per Service, the last skip reported, so that a
// skipped Service gets its Event and its count once per reason, not once
// per pass. Memory only: after a restart a skip is reported once more.
type importOutcomes struct {
	mu sync.Mutex
	m  map[types.NamespacedName]string
}

// changed records outcome for the Service and reports whether it differs
// from the last one.
func (o *importOutcomes) changed(key types.NamespacedName, uid types.UID, outcome string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[types.NamespacedName]string{}
	}
	v := string(uid) + "/" + outcome
	if o.m[key] == v {
		return false
	}
	o.m[key] = v
	return true
}

func (o *importOutcomes) forget(key types.NamespacedName) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.m, key)
}

// importFirst runs the import decision before anything else of the pass
// looks at the Service (conflict detection would otherwise report an
// address half-way through its import). It reports whether the pass goes
// on: false while an import is under way.
func (r *Reconciler) importFirst(ctx context.Context, s *scope) (bool, error) {
	sit, err := r.importSituation(ctx, s)
	if err != nil || sit == nil {
		return err == nil, err
	}
	p := PlanImport(*sit)
	svc := s.svc
	switch p.Step {
	case ImportSkip:
		if r.imports.changed(s.key, svc.UID, p.Reason) {
			log.FromContext(ctx).Info("import skipped", "reason", p.Reason, "ip", p.IP, "class", p.Class.Name)
			r.Recorder.Event(svc, corev1.EventTypeWarning, p.Reason, p.Message)
			if p.Reason == ReasonImportSkippedClaimNameTaken && sit.Claim != nil {
				r.Recorder.Event(sit.Claim, corev1.EventTypeWarning, p.Reason, msgClaimNameTaken(p, svc.Namespace, svc.Name))
			}
			importsTotal.WithLabelValues(p.Class.Name, importSkipped).Inc()
		}
		return true, nil
	case ImportRun:
		err := r.runImport(ctx, s, sit, p)
		if err != nil && !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			importsTotal.WithLabelValues(p.Class.Name, importFailed).Inc()
			r.Recorder.Eventf(svc, corev1.EventTypeWarning, ReasonImportFailed, "Importing %s failed, retrying: %v", p.IP, err)
		}
		if apierrors.IsAlreadyExists(err) {
			return false, conflictErr(err)
		}
		return false, err
	}
	r.imports.forget(s.key)
	return true, nil
}

// conflictErr turns an AlreadyExists (the cache had not seen an object yet)
// into the quick retry of a lost race.
func conflictErr(err error) error {
	return apierrors.NewConflict(iadv1alpha1.GroupVersion.WithResource("ipaddresses").GroupResource(), "", err)
}

// importSituation gathers the import decision's inputs from the cache. It
// returns nil when no class imports, or the Service holds nothing.
func (r *Reconciler) importSituation(ctx context.Context, s *scope) (*ImportSituation, error) {
	svc := s.svc
	ips := binding.IngressIPs(svc)
	if len(ips) == 0 || svc.DeletionTimestamp != nil || binding.Exempt(svc, r.PlaceholderNamespace) {
		return nil, nil
	}
	classes, err := r.adoptClasses(ctx)
	if err != nil || len(classes) == 0 {
		return nil, err
	}
	sit := &ImportSituation{
		Service: svc, PlaceholderNamespace: r.PlaceholderNamespace, Classes: classes,
		Ledger: map[string]*iadv1alpha1.IPAddress{}, Sharers: map[string][]string{}, Associated: len(s.mine),
	}
	for _, ip := range ips {
		var hits iadv1alpha1.IPAddressList
		if err := r.List(ctx, &hits, client.MatchingFields{index.AddressByIP: ip}); err != nil {
			return nil, err
		}
		if len(hits.Items) > 0 {
			sit.Ledger[ip] = &hits.Items[0]
		}
		var holders corev1.ServiceList
		if err := r.List(ctx, &holders, client.MatchingFields{index.ServiceByIngressIP: ip}); err != nil {
			return nil, err
		}
		for i := range holders.Items {
			h := &holders.Items[i]
			if h.UID == svc.UID || binding.Exempt(h, r.PlaceholderNamespace) {
				continue
			}
			sit.Sharers[ip] = append(sit.Sharers[ip], index.Key(h.Namespace, h.Name))
		}
	}
	claim := &iadv1alpha1.IPAddressClaim{}
	err = r.Get(ctx, types.NamespacedName{Namespace: svc.Namespace, Name: names.ImportedClaimName(svc.Name, svc.UID)}, claim)
	switch {
	case err == nil:
		sit.Claim = claim
	case !apierrors.IsNotFound(err):
		return nil, err
	}
	return sit, nil
}

// adoptClasses lists, from the cache, the classes this driver serves whose
// parameters parse and turn adoptExisting on. Classes whose parameters do
// not parse import nothing (the class controller reports them).
func (r *Reconciler) adoptClasses(ctx context.Context) ([]AdoptClass, error) {
	served, err := r.servedClasses(ctx)
	if err != nil {
		return nil, err
	}
	var out []AdoptClass
	for _, sc := range served {
		if !sc.params.AdoptExisting {
			continue
		}
		out = append(out, AdoptClass{Name: sc.class.Name, Reclaim: sc.class.Spec.ReclaimPolicy, Params: sc.params})
	}
	return out, nil
}

// runImport runs the import steps, each checking the cluster first so that
// a crash between any two is finished by the next pass:
//
//  1. the generated claim (deterministic name, spec.addressName naming the
//     imported address);
//  2. one patch of the Service: the claim annotation, the imported-into
//     marker and the driver's pin and markers (or, for a hand-written pin,
//     the owner-pin record), and the class's grant label, with an
//     optimistic lock;
//  3. once the core has seen the claim (its claim-protection finalizer is
//     on it), the IPAddress, pre-bound to the claim with its uid;
//  4. status.associatedTo naming the Service on the IPAddress; then the
//     Imported Events.
//
// The Service holds the address in MetalLB throughout; the IPAddress
// controller creates no hold placeholder for an address being imported.
func (r *Reconciler) runImport(ctx context.Context, s *scope, sit *ImportSituation, p ImportPlan) error {
	svc := s.svc
	logger := log.FromContext(ctx).WithValues("ip", p.IP, "claim", p.ClaimName, "class", p.Class.Name)

	claim := sit.Claim
	if claim == nil {
		claim = ImportedClaim(svc, p)
		if err := r.Create(ctx, claim); err != nil {
			return err
		}
		logger.Info("import: created the generated claim")
	}

	key := names.ClaimSharingKey(claim.Namespace, claim.Name, claim.UID)
	if p.HandPin != "" || ShareProblem(svc, key) != "" {
		key = ""
	}
	// The grant label goes in the same patch: once MetalLB serves the
	// address from the class pool, which admits only granted Services, the
	// Service keeps it.
	want, labels := ImportAnnotations(svc.Annotations, p, key), GrantLabels(svc.Labels, p.Class.Name)
	if !maps.Equal(want, svc.Annotations) || !maps.Equal(labels, svc.Labels) {
		took := binding.TakeOverPool(binding.CloneAnnotations(svc.Annotations))
		if err := patch.Meta(ctx, r, svc, func() { svc.Annotations, svc.Labels = want, labels }); err != nil {
			return err
		}
		logger.Info("import: annotated the Service")
		if took != "" {
			r.Recorder.Event(svc, corev1.EventTypeNormal, ReasonPoolRequestTakenOver, msgPoolRequestTakenOver(took, p.IP))
		}
		// A later pass must see the import under way, or it would take the
		// address about to be created for a conflict.
		r.waitForCache(ctx, svc, func(o client.Object) bool {
			return o.GetAnnotations()[names.AnnotationImportedInto] == p.ClaimName
		})
	}

	a := sit.Ledger[p.IP]
	if a == nil {
		// The core reclaims an address pre-bound to a claim its cache has
		// not seen yet (under Delete: deletes it). Its finalizer on the
		// claim shows it has seen it; the claim's update brings the Service
		// back, the quick retry is the safety net.
		if !controllerutil.ContainsFinalizer(claim, iadv1alpha1.ClaimProtectionFinalizer) {
			logger.V(1).Info("import: waiting for the core to see the generated claim")
			return conflictErr(errors.New("the core has not seen the generated claim yet"))
		}
		a = ImportedAddress(svc, claim, p)
		if err := r.Create(ctx, a); err != nil {
			return err
		}
		logger.Info("import: created the IPAddress", "address", a.Name)
		r.waitForCache(ctx, a, nil)
	}

	if AssociatedWith(a, svc.Namespace, svc.Name) {
		return nil
	}
	if err := patch.Status(ctx, r, a, func() {
		a.Status.AssociatedTo = &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: svc.Namespace, Name: svc.Name}
	}); err != nil {
		return err
	}
	logger.Info("imported", "address", a.Name)
	r.Recorder.Event(svc, corev1.EventTypeNormal, ReasonImported, msgImportedService(p, svc.Namespace))
	r.Recorder.Event(claim, corev1.EventTypeNormal, ReasonImported, msgImportedClaim(p, svc.Namespace, svc.Name))
	r.Recorder.Event(a, corev1.EventTypeNormal, ReasonImported, msgImportedAddress(p, svc.Namespace, svc.Name))
	importsTotal.WithLabelValues(p.Class.Name, importImported).Inc()
	return nil
}

// waitForCache waits, briefly, until the cache shows the object written
// and seen accepts it, so the next pass does not act on a stale read. On
// timeout the next pass re-reads; the steps check before they write.
func (r *Reconciler) waitForCache(ctx context.Context, obj client.Object, seen func(client.Object) bool) {
	_ = patch.WaitForCache(ctx, r.Client, nil, obj, seen, 5*time.Second)
}
