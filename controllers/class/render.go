package class

import (
	"context"
	"errors"
	"fmt"
	"time"

	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/patch"
	"github.com/cozystack/metallb-iad/internal/phase"
)

// cacheLagRetry is how soon a render is retried when the cache has not yet
// seen an object the API server already has.
const cacheLagRetry = 200 * time.Millisecond

// admit is the decide phase: a refused class is reported and the pass ends.
func (r *Reconciler) admit(ctx context.Context, s *scope) (phase.Result, error) {
	params, ref, err := r.decide(ctx, s.class)
	if err != nil {
		return phase.Result{}, err
	}
	s.params, s.refused = params, ref
	if ref != nil {
		r.refuse(ctx, s.class, ref)
		return phase.Halt(ref.reason, 0), nil
	}
	return phase.Next(), nil
}

// render is the render phase: it creates or patches the pool and the
// advertisement, then withdraws anything else rendered for the class (an
// advertisement of the other kind).
func (r *Reconciler) render(ctx context.Context, s *scope) (phase.Result, error) {
	grant, settle, err := r.decideGrant(ctx, s.class)
	if err != nil {
		return phase.Result{}, err
	}
	pool, adv := desired(s.class, s.params, r.MetalLBNamespace, grant)
	objs := []client.Object{pool, adv}
	// Both names are checked before either is written: nothing is rendered
	// half-way.
	for _, obj := range objs {
		msg, err := r.controlledElsewhere(ctx, obj)
		if err != nil {
			return phase.Result{}, err
		}
		if msg != "" {
			return r.nameTaken(ctx, s, msg), nil
		}
	}
	writes, stop, err := r.write(ctx, s, objs)
	if err != nil || stop.State == phase.Stop {
		return stop, err
	}
	recordRendered(s.class.Name, s.params)
	r.reported.Forget(s.class.Name)
	if len(writes) > 0 {
		log.FromContext(ctx).Info("class rendered", "namespace", r.MetalLBNamespace, "pool", pool.Name, "advertisement", kindOf(adv), "changes", writes)
		r.Recorder.Event(s.class, corev1.EventTypeNormal, ReasonRendered, msgRendered(r.MetalLBNamespace, pool, adv, s.params, writes))
	}
	if settle > 0 {
		return phase.RetryAfter(settle, "every address was granted a moment ago"), nil
	}
	return phase.Next(), nil
}

// desired is what render writes for the class: Render's objects, the pool
// requiring the grant label when grant is decided.
func desired(class *iadv1alpha1.IPAddressClass, params classparams.Parameters, namespace string, grant bool) (*metallbv1beta1.IPAddressPool, client.Object) {
	pool, adv := Render(class, params, namespace)
	if grant {
		marks.WithGrant(pool, class.Name)
	}
	return pool, adv
}

// nameTaken refuses the class with PoolNameTaken and ends the pass.
func (r *Reconciler) nameTaken(ctx context.Context, s *scope, msg string) phase.Result {
	r.refuse(ctx, s.class, &refusal{reason: ReasonPoolNameTaken, message: msg, params: &s.params})
	return phase.Halt(ReasonPoolNameTaken, 0)
}

// write applies objs in turn, then withdraws what else was rendered for
// the class. It returns the writes made ("<op> <Kind> <name>"), or a Stop
// when one of objs cannot be written yet.
func (r *Reconciler) write(ctx context.Context, s *scope, objs []client.Object) ([]string, phase.Result, error) {
	var writes []string
	for _, obj := range objs {
		op, err := r.apply(ctx, obj)
		var elsewhere errControlledElsewhere
		switch {
		case errors.As(err, &elsewhere):
			return nil, r.nameTaken(ctx, s, elsewhere.msg), nil
		case kerrors.IsAlreadyExists(err):
			log.FromContext(ctx).V(1).Info("the cache is behind; retrying", "kind", kindOf(obj), "name", obj.GetName())
			return nil, phase.Halt("the cache is behind", cacheLagRetry), nil
		case err != nil:
			return nil, phase.Result{}, err
		}
		if op != controllerutil.OperationResultNone {
			writes = append(writes, fmt.Sprintf("%s %s %s", op, kindOf(obj), obj.GetName()))
		}
	}
	removed, err := r.withdraw(ctx, s.class.Name, objs)
	if err != nil {
		return nil, phase.Result{}, err
	}
	for _, o := range removed {
		writes = append(writes, "removed "+o)
	}
	return writes, phase.Next(), nil
}

// decideGrant decides from the cache whether the pool requires the grant
// label (GrantDecision), and when to decide again if every address was
// granted only a moment ago; it reports WaitingForGrant once per change.
func (r *Reconciler) decideGrant(ctx context.Context, class *iadv1alpha1.IPAddressClass) (bool, time.Duration, error) {
	existing := &metallbv1beta1.IPAddressPool{}
	switch err := r.Get(ctx, types.NamespacedName{Namespace: r.MetalLBNamespace, Name: names.PoolName(class.Name)}, existing); {
	case kerrors.IsNotFound(err):
		existing = nil
	case err != nil:
		return false, 0, err
	}
	var addrs iadv1alpha1.IPAddressList
	if existing != nil && !marks.RequiresGrant(existing, class.Name) {
		if err := r.List(ctx, &addrs, client.MatchingFields{index.AddressByClass: class.Name}); err != nil {
			return false, 0, err
		}
	}
	grant, waiting, settle := classparams.GrantDecision(existing, class.Name, addrs.Items, time.Now())
	if grant {
		r.grantReported.Forget(class.Name)
		return true, 0, nil
	}
	if len(waiting) == 0 {
		return false, settle, nil
	}
	msg := msgWaitingForGrant(r.MetalLBNamespace, class.Name, waiting)
	if r.grantReported.Changed(class.Name, msg) {
		log.FromContext(ctx).Info("the pool does not require the grant label yet", "waiting", len(waiting))
		r.Recorder.Event(class, corev1.EventTypeNormal, ReasonWaitingForGrant, msg)
	}
	return false, 0, nil
}

// controlledElsewhere returns why desired cannot be rendered when an object
// of its kind and name is controlled by something other than the class; ""
// otherwise. An object the cache does not hold is looked up on the API
// server: one created a moment ago by someone else must stop the pool from
// being created before its advertisement is found taken.
func (r *Reconciler) controlledElsewhere(ctx context.Context, desired client.Object) (string, error) {
	existing, ok := desired.DeepCopyObject().(client.Object)
	if !ok {
		return "", fmt.Errorf("cannot copy a %T", desired)
	}
	err := r.Get(ctx, client.ObjectKeyFromObject(desired), existing)
	if kerrors.IsNotFound(err) {
		err = r.APIReader.Get(ctx, client.ObjectKeyFromObject(desired), existing)
	}
	if kerrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if _, err := TakeOver(existing.GetOwnerReferences(), desired.GetLabels()[LabelClass]); err != nil {
		return controlledElsewhereMessage(desired, err), nil
	}
	return "", nil
}

// errControlledElsewhere is returned by apply when the object to render
// exists and is controlled by something other than the class.
type errControlledElsewhere struct{ msg string }

func (e errControlledElsewhere) Error() string { return e.msg }

// apply creates desired, or patches the existing object in place (merge).
func (r *Reconciler) apply(ctx context.Context, desired client.Object) (controllerutil.OperationResult, error) {
	obj, setSpec, err := emptyOf(desired)
	if err != nil {
		return controllerutil.OperationResultNone, err
	}
	var stored string
	op, err := controllerutil.CreateOrPatch(ctx, r.Client, obj, func() error {
		stored = obj.GetResourceVersion()
		return merge(obj, desired, setSpec)
	})
	if op == controllerutil.OperationResultUpdated && obj.GetResourceVersion() == stored {
		// The API server found nothing to change (for example a field it
		// defaults): not a change worth an Event.
		op = controllerutil.OperationResultNone
	}
	return op, err
}

// emptyOf returns an object of desired's kind and key, and the function
// that gives it desired's spec.
func emptyOf(desired client.Object) (client.Object, func(), error) {
	var obj client.Object
	var setSpec func()
	switch d := desired.(type) {
	case *metallbv1beta1.IPAddressPool:
		o := &metallbv1beta1.IPAddressPool{}
		obj, setSpec = o, func() { o.Spec = d.Spec }
	case *metallbv1beta1.L2Advertisement:
		o := &metallbv1beta1.L2Advertisement{}
		obj, setSpec = o, func() { o.Spec = d.Spec }
	case *metallbv1beta1.BGPAdvertisement:
		o := &metallbv1beta1.BGPAdvertisement{}
		obj, setSpec = o, func() { o.Spec = d.Spec }
	default:
		return nil, nil, fmt.Errorf("cannot render a %T", desired)
	}
	obj.SetNamespace(desired.GetNamespace())
	obj.SetName(desired.GetName())
	return obj, setSpec, nil
}

// merge makes obj what desired renders: our labels merged in, an older
// version's owner reference to the class and the retained-for note
// dropped, the spec replaced (setSpec). Other labels, annotations and
// owners stay.
func merge(obj, desired client.Object, setSpec func()) error {
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	for k, v := range desired.GetLabels() {
		labels[k] = v
	}
	obj.SetLabels(labels)
	if ann := obj.GetAnnotations(); ann[AnnotationRetained] != "" {
		delete(ann, AnnotationRetained) // the class is back
		obj.SetAnnotations(ann)
	}
	refs, err := TakeOver(obj.GetOwnerReferences(), desired.GetLabels()[LabelClass])
	if err != nil {
		return errControlledElsewhere{msg: controlledElsewhereMessage(desired, err)}
	}
	obj.SetOwnerReferences(refs)
	setSpec()
	return nil
}

// withdraw deletes the MetalLB objects rendered for the class except those
// in keep, kind by kind. It returns "<Kind> <name>" of each deleted object.
func (r *Reconciler) withdraw(ctx context.Context, class string, keep []client.Object) ([]string, error) {
	kept := map[string]bool{}
	for _, k := range keep {
		kept[kindOf(k)+"/"+k.GetName()] = true
	}
	var removed []string
	for _, single := range []client.Object{
		&metallbv1beta1.IPAddressPool{},
		&metallbv1beta1.L2Advertisement{},
		&metallbv1beta1.BGPAdvertisement{},
	} {
		candidates, err := r.renderedFor(ctx, class, single)
		if err != nil {
			return removed, err
		}
		kind := kindOf(single)
		for _, o := range toWithdraw(kind, candidates, kept) {
			// A conflict is a successor of the same name: not ours to delete.
			deleted, err := patch.Delete(ctx, r.Client, o, false)
			if err != nil && !kerrors.IsConflict(err) {
				return removed, err
			}
			if deleted {
				removed = append(removed, kind+" "+o.GetName())
				log.FromContext(ctx).Info("removed a rendered object", "kind", kind, "namespace", o.GetNamespace(), "name", o.GetName())
			}
		}
	}
	return removed, nil
}

// renderedFor lists the objects of single's kind rendered for the class:
// those labelled for it, then the one named for it when it is controlled
// by a class of that name (written by an older version). single is filled.
func (r *Reconciler) renderedFor(ctx context.Context, class string, single client.Object) ([]client.Object, error) {
	list, err := listOf(single)
	if err != nil {
		return nil, err
	}
	if err := r.List(ctx, list, client.InNamespace(r.MetalLBNamespace), client.MatchingLabels(RenderedLabels(class))); err != nil {
		return nil, err
	}
	candidates := objectsOf(list)
	err = r.Get(ctx, types.NamespacedName{Namespace: r.MetalLBNamespace, Name: names.PoolName(class)}, single)
	switch {
	case err == nil && controlledByClass(single, class):
		candidates = append(candidates, single)
	case err != nil && !kerrors.IsNotFound(err):
		return nil, err
	}
	return candidates, nil
}

// toWithdraw picks the candidates of one kind to delete: each name once,
// none in kept ("<Kind>/<name>").
func toWithdraw(kind string, candidates []client.Object, kept map[string]bool) []client.Object {
	var out []client.Object
	seen := map[string]bool{}
	for _, o := range candidates {
		key := kind + "/" + o.GetName()
		if kept[key] || seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, o)
	}
	return out
}

func listOf(o client.Object) (client.ObjectList, error) {
	switch o.(type) {
	case *metallbv1beta1.IPAddressPool:
		return &metallbv1beta1.IPAddressPoolList{}, nil
	case *metallbv1beta1.L2Advertisement:
		return &metallbv1beta1.L2AdvertisementList{}, nil
	case *metallbv1beta1.BGPAdvertisement:
		return &metallbv1beta1.BGPAdvertisementList{}, nil
	}
	return nil, fmt.Errorf("cannot list a %T", o)
}

func objectsOf(list client.ObjectList) []client.Object {
	var out []client.Object
	switch l := list.(type) {
	case *metallbv1beta1.IPAddressPoolList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *metallbv1beta1.L2AdvertisementList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *metallbv1beta1.BGPAdvertisementList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	}
	return out
}

func kindOf(o client.Object) string {
	switch o.(type) {
	case *metallbv1beta1.IPAddressPool:
		return "IPAddressPool"
	case *metallbv1beta1.L2Advertisement:
		return "L2Advertisement"
	case *metallbv1beta1.BGPAdvertisement:
		return "BGPAdvertisement"
	}
	return fmt.Sprintf("%T", o)
}

// controlledByClass reports whether o was rendered for the class: it
// carries RenderedLabels of the class, or (written by an older version) a
// controller reference to an IPAddressClass of that name.
func controlledByClass(o metav1.Object, class string) bool {
	if l := o.GetLabels(); l[LabelManagedBy] == ManagedBy && l[LabelClass] == class {
		return true
	}
	ref := metav1.GetControllerOf(o)
	return ref != nil && isClassRef(*ref) && ref.Name == class
}
