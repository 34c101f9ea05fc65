package service

import (
	"context"
	"maps"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/changes"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/patch"
	"github.com/cozystack/metallb-iad/internal/phase"
)

// cacheWait bounds a wait for the cache to show an import step's write.
const cacheWait = 5 * time.Second

// importOutcomes remembers, per Service, the last skip reported, so a
// skipped Service gets its Event and its count once per reason.
type importOutcomes struct{ memo changes.Memo }

func (o *importOutcomes) changed(key types.NamespacedName, uid types.UID, outcome string) bool {
	return o.memo.Changed(key.String(), string(uid)+"/"+outcome)
}

func (o *importOutcomes) forget(key types.NamespacedName) { o.memo.Forget(key.String()) }

// importFirst runs the import decision before anything else of the pass
// looks at the Service: conflict detection would otherwise report an
// address half-way through its import. The pass ends while an import is
// under way.
func (r *Reconciler) importFirst(ctx context.Context, s *scope) (phase.Result, error) {
	sit, err := r.importSituation(ctx, s)
	if err != nil || sit == nil {
		return phase.Next(), err
	}
	p := PlanImport(*sit)
	switch p.Step {
	case ImportSkip:
		r.reportSkip(ctx, s, sit, p)
		return phase.Next(), nil
	case ImportRun:
		res, err := r.runImport(ctx, s, sit, p)
		if err != nil && !apierrors.IsConflict(err) {
			importsTotal.WithLabelValues(p.Class.Name, importFailed).Inc()
			r.Recorder.Event(s.svc, corev1.EventTypeWarning, ReasonImportFailed, msgImportFailed(p.IP, err))
		}
		return res, err
	}
	r.imports.forget(s.key)
	return phase.Next(), nil
}

// reportSkip reports a skipped import once per reason.
func (r *Reconciler) reportSkip(ctx context.Context, s *scope, sit *ImportSituation, p ImportPlan) {
	svc := s.svc
	if !r.imports.changed(s.key, svc.UID, p.Reason) {
		return
	}
	log.FromContext(ctx).Info("import skipped", "reason", p.Reason, "ip", p.IP, "class", p.Class.Name)
	r.Recorder.Event(svc, corev1.EventTypeWarning, p.Reason, p.Message)
	if p.Reason == ReasonImportSkippedClaimNameTaken && sit.Claim != nil {
		r.Recorder.Event(sit.Claim, corev1.EventTypeWarning, p.Reason, msgClaimNameTaken(p, svc.Namespace, svc.Name))
	}
	importsTotal.WithLabelValues(p.Class.Name, importSkipped).Inc()
}

// importSituation reads the import decision's inputs from the cache; nil
// when no class imports or the Service holds nothing.
func (r *Reconciler) importSituation(ctx context.Context, s *scope) (*ImportSituation, error) {
	svc := s.svc
	ips := marks.IngressIPs(svc)
	if len(ips) == 0 || svc.DeletionTimestamp != nil || marks.Exempt(svc, r.PlaceholderNamespace) {
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
			if h.UID == svc.UID || marks.Exempt(h, r.PlaceholderNamespace) {
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

// adoptClasses lists the served classes with adoptExisting on.
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

// runImport runs the import steps (docs/design.md, section 9), each
// checking the cluster first so that the next pass finishes what a crash
// interrupted. The Service holds the address in MetalLB throughout; the
// IPAddress controller creates no hold for an address being imported. The
// pass ends after a step, and while a step waits for the core or the
// cache, whose writes bring the Service back: the wait's fallback is
// phase.ConflictRetry, as for a write that lost a race.
func (r *Reconciler) runImport(ctx context.Context, s *scope, sit *ImportSituation, p ImportPlan) (phase.Result, error) {
	logger := log.FromContext(ctx).WithValues("ip", p.IP, "claim", p.ClaimName, "class", p.Class.Name)
	underWay := phase.Halt("an import is under way", 0)
	claim := sit.Claim
	if claim == nil {
		claim = ImportedClaim(s.svc, p)
		if err := r.Create(ctx, claim); apierrors.IsAlreadyExists(err) {
			return phase.HaltFor("the cache to show the generated claim", phase.ConflictRetry), nil
		} else if err != nil {
			return underWay, err
		}
		logger.Info("import: created the generated claim")
	}
	if err := r.annotateImport(ctx, s.svc, claim, p, logger); err != nil {
		return underWay, err
	}
	a, wait, err := r.importAddress(ctx, s.svc, claim, sit.Ledger[p.IP], p, logger)
	if err != nil {
		return underWay, err
	}
	if wait != "" {
		return phase.HaltFor(wait, phase.ConflictRetry), nil
	}
	if AssociatedWith(a, s.svc.Namespace, s.svc.Name) {
		return underWay, nil
	}
	return underWay, r.associateImport(ctx, s, claim, a, p, logger)
}

// annotateImport writes ImportAnnotations and ImportMarks in one patch: once MetalLB serves the address from the class pool, which admits
// only granted Services, the Service keeps it.
func (r *Reconciler) annotateImport(ctx context.Context, svc *corev1.Service, claim *iadv1alpha1.IPAddressClaim, p ImportPlan, logger logr.Logger) error {
	key := r.Keys.Now().Claim(claim.Namespace, claim.Name, claim.UID)
	if p.HandPin != "" || ShareProblem(svc, key) != "" {
		key = ""
	}
	m, took := ImportMarks(marks.Of(svc), p, key)
	annotations := ImportAnnotations(svc.Annotations, p)
	if !m.Changed() && maps.Equal(annotations, svc.Annotations) {
		return nil
	}
	if err := patch.Meta(ctx, r, svc, func() {
		svc.Annotations = annotations
		m.Apply(svc)
	}); err != nil {
		return err
	}
	logger.Info("import: annotated the Service")
	if took != "" {
		r.Recorder.Event(svc, corev1.EventTypeNormal, ReasonPoolRequestTakenOver, msgPoolRequestTakenOver(took, p.IP))
	}
	// A later pass must see the import under way, or it would take the
	// address about to be created for a conflict. On timeout the next pass
	// re-reads; the steps check before they write.
	_ = patch.WaitForCache(ctx, r.Client, nil, svc, func(o client.Object) bool {
		return marks.ImportedInto(o) == p.ClaimName
	}, cacheWait)
	return nil
}

// importAddress returns the imported IPAddress (a, from the ledger), or
// creates it once the core has seen the claim (its finalizer is on it):
// the core reclaims an address pre-bound to a claim its cache does not
// show. Until then it names what it waits for: the claim's update brings
// the Service back.
func (r *Reconciler) importAddress(ctx context.Context, svc *corev1.Service, claim *iadv1alpha1.IPAddressClaim, a *iadv1alpha1.IPAddress, p ImportPlan, logger logr.Logger) (_ *iadv1alpha1.IPAddress, wait string, _ error) {
	if a != nil {
		return a, "", nil
	}
	if !controllerutil.ContainsFinalizer(claim, iadv1alpha1.ClaimProtectionFinalizer) {
		return nil, "the core to see the generated claim", nil
	}
	a = ImportedAddress(svc, claim, p)
	// A wait that times out is no error: the next pass re-reads.
	if created, err := patch.CreateAndWait(ctx, r.Client, nil, a, cacheWait); !created {
		if err == nil {
			return nil, "the cache to show the existing IPAddress", nil
		}
		return nil, "", err
	}
	logger.Info("import: created the IPAddress", "address", a.Name)
	return a, "", nil
}

// associateImport records status.associatedTo naming the Service on the
// imported address, then the Imported Events.
func (r *Reconciler) associateImport(ctx context.Context, s *scope, claim *iadv1alpha1.IPAddressClaim, a *iadv1alpha1.IPAddress, p ImportPlan, logger logr.Logger) error {
	svc := s.svc
	s.status.set(a, func(st *iadv1alpha1.IPAddressStatus) {
		st.AssociatedTo = &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: svc.Namespace, Name: svc.Name}
	}, func() {
		logger.Info("imported", "address", a.Name)
		r.Recorder.Event(svc, corev1.EventTypeNormal, ReasonImported, msgImportedService(p, svc.Namespace))
		r.Recorder.Event(claim, corev1.EventTypeNormal, ReasonImported, msgImportedClaim(p, svc.Namespace, svc.Name))
		r.Recorder.Event(a, corev1.EventTypeNormal, ReasonImported, msgImportedAddress(p, svc.Namespace, svc.Name))
		importsTotal.WithLabelValues(p.Class.Name, importImported).Inc()
	})
	// Flushed here: the import's last step, after which the pass ends
	// (runImport halts), so this is the address's one write of the pass;
	// written now, a failure is reported as ImportFailed, as every other
	// step's is (importFirst).
	return s.status.flush(ctx, r)
}
