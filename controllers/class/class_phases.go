package class

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/names"
)

// cacheLagRetry is how soon a render is retried when the cache has not yet
// seen an object the API server already has.
const cacheLagRetry = 200 * time.Millisecond

// refusal is why a class is not rendered.
type refusal struct {
	reason  string
	message string
	// params are the parsed parameters, nil when they did not parse.
	params *classparams.Parameters
}

// decide checks the class name, parses the parameters and looks for an
// overlap. It returns the parameters to render, or a refusal.
func (r *Reconciler) decide(ctx context.Context, class *iadv1alpha1.IPAddressClass) (classparams.Parameters, *refusal, error) {
	if err := classparams.CheckName(class.Name); err != nil {
		return classparams.Parameters{}, &refusal{reason: ReasonInvalidClassName, message: err.Error()}, nil
	}
	params, err := classparams.ParseParameters(class.Spec.Parameters)
	if err != nil {
		return classparams.Parameters{}, &refusal{reason: ReasonInvalidParameters, message: err.Error()}, nil
	}
	o, adoptable, err := r.overlap(ctx, r.Client, class, params)
	if err != nil {
		return classparams.Parameters{}, nil, err
	}
	if o != nil {
		return classparams.Parameters{}, &refusal{reason: ReasonOverlappingRanges, message: o.Error(), params: &params}, nil
	}
	dropped, err := r.dropped(ctx, class, params)
	if err != nil {
		return classparams.Parameters{}, nil, err
	}
	if len(dropped) > 0 {
		return classparams.Parameters{}, &refusal{reason: ReasonAddressesInUse,
			message: classparams.DroppedMessage(r.MetalLBNamespace+"/"+names.PoolName(class.Name), dropped), params: &params}, nil
	}
	// The cache may not hold a pool or class created a moment ago. Before
	// the pool's ranges change, look on the API server itself: MetalLB
	// refuses its whole configuration when two pools overlap.
	changing, err := r.rangesChange(ctx, class, params)
	if err != nil {
		return classparams.Parameters{}, nil, err
	}
	if changing {
		if o, adoptable, err = r.overlap(ctx, r.APIReader, class, params); err != nil {
			return classparams.Parameters{}, nil, err
		}
		if o != nil {
			return classparams.Parameters{}, &refusal{reason: ReasonOverlappingRanges, message: o.Error(), params: &params}, nil
		}
	}
	r.reportAdoptOverlap(ctx, class, classparams.FindOverlap(params.Addresses, adoptable))
	return params, nil, nil
}

// reportAdoptOverlap records the OverlapsLivePool Warning on a class with
// adoptExisting whose ranges overlap a pool this driver did not render
// (once per overlap in this process, like a refusal); o nil forgets it.
func (r *Reconciler) reportAdoptOverlap(ctx context.Context, class *iadv1alpha1.IPAddressClass, o *classparams.Overlap) {
	if o == nil {
		r.adoptReported.Delete(class.Name)
		return
	}
	msg := classparams.AdoptOverlapMessage(o, r.MetalLBNamespace+"/"+names.PoolName(class.Name))
	key := string(class.UID) + "\x00" + msg
	if last, ok := r.adoptReported.Swap(class.Name, key); ok && last == key {
		return
	}
	log.FromContext(ctx).Info("rendering over a pool this driver did not render, to adopt what MetalLB assigned from it", "pool", o.With.Pool)
	r.Recorder.Event(class, corev1.EventTypeWarning, ReasonOverlapsLivePool, msg)
}

// dropped lists the live addresses of the class that the pool rendered for
// it (from the cache) contains and the new parameters do not. No pool
// rendered for the class, nothing is dropped.
func (r *Reconciler) dropped(ctx context.Context, class *iadv1alpha1.IPAddressClass, params classparams.Parameters) ([]*iadv1alpha1.IPAddress, error) {
	pool := &metallbv1beta1.IPAddressPool{}
	err := r.Get(ctx, types.NamespacedName{Namespace: r.MetalLBNamespace, Name: names.PoolName(class.Name)}, pool)
	if kerrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !controlledByClass(pool, class.Name) {
		return nil, nil
	}
	var addrs iadv1alpha1.IPAddressList
	if err := r.List(ctx, &addrs, client.MatchingFields{index.AddressByClass: class.Name}); err != nil {
		return nil, err
	}
	return classparams.Dropped(addrs.Items, classparams.PoolRanges(pool.Spec.Addresses), params.Addresses), nil
}

// addressToClass maps an IPAddress to its class: a class refused because
// it would drop addresses in use is rendered once they are gone.
func addressToClass(_ context.Context, o client.Object) []reconcile.Request {
	a, ok := o.(*iadv1alpha1.IPAddress)
	if !ok || a.Spec.ClassName == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: a.Spec.ClassName}}}
}

// ledgerChanged passes the IPAddress events that can change what a class
// change drops, or what its refusal says about it: an address created or
// deleted, starting to be deleted, moved to another class, given to
// another claim, or attached or detached. A refusal decided from a cache
// that had not yet seen an attachment is told again, naming the Service.
var ledgerChanged = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return true },
	DeleteFunc:  func(event.DeleteEvent) bool { return true },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*iadv1alpha1.IPAddress), e.ObjectNew.(*iadv1alpha1.IPAddress)
		return ledgerEntryChanged(o, n)
	},
}

// ledgerEntryChanged tells whether an IPAddress changed in what a class
// change drops or what DroppedMessage says about it.
func ledgerEntryChanged(o, n *iadv1alpha1.IPAddress) bool {
	return (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) ||
		o.Spec.ClassName != n.Spec.ClassName ||
		!equality.Semantic.DeepEqual(o.Spec.ClaimRef, n.Spec.ClaimRef) ||
		!equality.Semantic.DeepEqual(o.Status.AssociatedTo, n.Status.AssociatedTo)
}

// overlap returns the first overlap of the class's addresses with what they
// must not overlap, and the live pools they may overlap (adoptExisting), as
// read from from.
func (r *Reconciler) overlap(ctx context.Context, from client.Reader, class *iadv1alpha1.IPAddressClass, params classparams.Parameters) (*classparams.Overlap, []classparams.Occupant, error) {
	occupants, err := r.occupants(ctx, from, class)
	if err != nil {
		return nil, nil, err
	}
	refusing, adoptable := classparams.SplitAdoptable(occupants, params.AdoptExisting)
	return classparams.FindOverlap(params.Addresses, refusing), adoptable, nil
}

// rangesChange tells whether rendering the class would create its pool or
// change the pool's addresses, going by the cache.
func (r *Reconciler) rangesChange(ctx context.Context, class *iadv1alpha1.IPAddressClass, params classparams.Parameters) (bool, error) {
	desired, _ := Render(class, params, r.MetalLBNamespace)
	existing := &metallbv1beta1.IPAddressPool{}
	err := r.Get(ctx, client.ObjectKeyFromObject(desired), existing)
	if kerrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return !slices.Equal(existing.Spec.Addresses, desired.Spec.Addresses), nil
}

// occupants lists what the class's addresses must not overlap: the
// parameters of this driver's older classes (oldest first), then every
// other IPAddressPool in the MetalLB namespace (by name), as read from
// from: the informer cache, or the API server before the pool's ranges change.
func (r *Reconciler) occupants(ctx context.Context, from client.Reader, class *iadv1alpha1.IPAddressClass) ([]classparams.Occupant, error) {
	var classes iadv1alpha1.IPAddressClassList
	if err := from.List(ctx, &classes); err != nil {
		return nil, err
	}
	out := classparams.OlderClasses(class, classes.Items)

	var pools metallbv1beta1.IPAddressPoolList
	if err := from.List(ctx, &pools, client.InNamespace(r.MetalLBNamespace)); err != nil {
		return nil, err
	}
	slices.SortFunc(pools.Items, func(a, b metallbv1beta1.IPAddressPool) int { return strings.Compare(a.Name, b.Name) })
	own := names.PoolName(class.Name)
	for _, p := range pools.Items {
		if p.Name == own {
			continue
		}
		o := classparams.Occupant{Pool: p.Name, Ranges: classparams.PoolRanges(p.Spec.Addresses)}
		if p.Labels[LabelManagedBy] == ManagedBy {
			o.Class = p.Labels[LabelClass]
		}
		out = append(out, o)
	}
	return out, nil
}

// refuse reports a refusal; the previous rendering stays as it is. The
// Event and the log line are emitted when the refusal is new for this class
// (in this process), not on every pass.
func (r *Reconciler) refuse(ctx context.Context, class *iadv1alpha1.IPAddressClass, ref *refusal) {
	recordRefused(class.Name, ref.reason, ref.params)
	key := string(class.UID) + "\x00" + ref.reason + "\x00" + ref.message
	if last, ok := r.reported.Swap(class.Name, key); ok && last == key {
		log.FromContext(ctx).V(1).Info("class still refused", "reason", ref.reason)
		return
	}
	log.FromContext(ctx).Info("class refused; its previous rendering, if any, is kept", "reason", ref.reason, "message", ref.message)
	r.Recorder.Event(class, corev1.EventTypeWarning, ref.reason, ref.message)
}

// errControlledElsewhere is returned by apply when the object to render
// exists and is controlled by something other than the class.
type errControlledElsewhere struct{ msg string }

func (e errControlledElsewhere) Error() string { return e.msg }

// render creates or patches the pool and the advertisement, then removes
// anything else rendered for the class (an advertisement of the other kind).
func (r *Reconciler) render(ctx context.Context, class *iadv1alpha1.IPAddressClass, params classparams.Parameters) (ctrl.Result, error) {
	pool, adv := Render(class, params, r.MetalLBNamespace)
	grant, settle, err := r.decideGrant(ctx, class)
	if err != nil {
		return ctrl.Result{}, err
	}
	if grant {
		classparams.WithGrant(pool, class.Name)
	}
	// Check both names before writing either, so that nothing is rendered
	// half-way.
	for _, obj := range []client.Object{pool, adv} {
		if msg, err := r.controlledElsewhere(ctx, obj); err != nil {
			return ctrl.Result{}, err
		} else if msg != "" {
			r.refuse(ctx, class, &refusal{reason: ReasonPoolNameTaken, message: msg, params: &params})
			return ctrl.Result{}, nil
		}
	}
	var changes []string
	for _, obj := range []client.Object{pool, adv} {
		op, err := r.apply(ctx, obj)
		var elsewhere errControlledElsewhere
		switch {
		case errors.As(err, &elsewhere):
			r.refuse(ctx, class, &refusal{reason: ReasonPoolNameTaken, message: elsewhere.msg, params: &params})
			return ctrl.Result{}, nil
		case kerrors.IsAlreadyExists(err):
			// The cache has not seen an object created moments ago; look again
			// once it has.
			log.FromContext(ctx).V(1).Info("the cache is behind; retrying", "kind", kindOf(obj), "name", obj.GetName())
			return ctrl.Result{RequeueAfter: cacheLagRetry}, nil
		case err != nil:
			return ctrl.Result{}, err
		}
		if op != controllerutil.OperationResultNone {
			changes = append(changes, fmt.Sprintf("%s %s %s", op, kindOf(obj), obj.GetName()))
		}
	}
	removed, err := r.withdraw(ctx, class.Name, []client.Object{pool, adv})
	if err != nil {
		return ctrl.Result{}, err
	}
	for _, o := range removed {
		changes = append(changes, "removed "+o)
	}
	recordRendered(class.Name, params)
	r.reported.Delete(class.Name)
	if len(changes) == 0 {
		return ctrl.Result{RequeueAfter: settle}, nil
	}
	addrs := make([]string, 0, len(params.Addresses))
	for _, a := range params.Addresses {
		addrs = append(addrs, a.Text)
	}
	msg := fmt.Sprintf("IPAddressPool %s/%s with %s, announced by %s %s: %s",
		r.MetalLBNamespace, pool.Name, strings.Join(addrs, ", "), kindOf(adv), adv.GetName(), strings.Join(changes, ", "))
	log.FromContext(ctx).Info("class rendered", "namespace", r.MetalLBNamespace, "pool", pool.Name, "advertisement", kindOf(adv), "changes", changes)
	r.Recorder.Event(class, corev1.EventTypeNormal, ReasonRendered, msg)
	return ctrl.Result{RequeueAfter: settle}, nil
}

// decideGrant reads the class's pool and addresses from the cache and
// decides whether the pool requires the grant label (GrantDecision), and
// when to decide again if every address was granted only a moment ago.
// While it waits for addresses to be granted it says so once per change,
// in a Normal Event WaitingForGrant on the class.
func (r *Reconciler) decideGrant(ctx context.Context, class *iadv1alpha1.IPAddressClass) (bool, time.Duration, error) {
	existing := &metallbv1beta1.IPAddressPool{}
	switch err := r.Get(ctx, types.NamespacedName{Namespace: r.MetalLBNamespace, Name: names.PoolName(class.Name)}, existing); {
	case kerrors.IsNotFound(err):
		existing = nil
	case err != nil:
		return false, 0, err
	}
	var addrs iadv1alpha1.IPAddressList
	if existing != nil && !classparams.RequiresGrant(existing, class.Name) {
		if err := r.List(ctx, &addrs, client.MatchingFields{index.AddressByClass: class.Name}); err != nil {
			return false, 0, err
		}
	}
	grant, waiting, settle := classparams.GrantDecision(existing, class.Name, addrs.Items, time.Now())
	if grant {
		r.grantReported.Delete(class.Name)
		return true, 0, nil
	}
	if len(waiting) == 0 {
		return false, settle, nil // every address granted a moment ago
	}
	msg := msgWaitingForGrant(r.MetalLBNamespace, names.PoolName(class.Name), waiting)
	if last, ok := r.grantReported.Swap(class.Name, msg); !ok || last != msg {
		log.FromContext(ctx).Info("the pool does not require the grant label yet", "waiting", len(waiting))
		r.Recorder.Event(class, corev1.EventTypeNormal, ReasonWaitingForGrant, msg)
	}
	return false, 0, nil
}

func msgWaitingForGrant(namespace, pool string, waiting []string) string {
	shown := waiting
	if len(shown) > 3 {
		shown = shown[:3]
	}
	more := ""
	if n := len(waiting) - len(shown); n > 0 {
		more = fmt.Sprintf(" and %d more", n)
	}
	return fmt.Sprintf("IPAddressPool %s/%s does not require the grant label %s yet: %d address(es) of the class (%s%s) are held by Services the driver has not labelled yet; it will once they are, so that no address in use is dropped",
		namespace, pool, names.LabelGrant, len(waiting), strings.Join(shown, ", "), more)
}

// controlledElsewhere returns why desired cannot be rendered when an object
// of its kind and name exists and is controlled by something other than the
// class; "" otherwise. An object the cache does not hold is looked up on the
// API server: one created a moment ago by someone else must stop the pool
// from being created before its advertisement is found taken.
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

func controlledElsewhereMessage(desired client.Object, err error) string {
	return fmt.Sprintf("cannot render %s %s/%s: %v", kindOf(desired), desired.GetNamespace(), desired.GetName(), err)
}

// apply creates desired, or patches the existing object in place: our
// labels are merged in, an older version's owner reference to the class and
// the retained-for note are dropped, the spec is replaced by the rendered
// one. Nothing else (other labels, annotations, other owners) is touched.
func (r *Reconciler) apply(ctx context.Context, desired client.Object) (controllerutil.OperationResult, error) {
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
		return controllerutil.OperationResultNone, fmt.Errorf("cannot render a %T", desired)
	}
	obj.SetNamespace(desired.GetNamespace())
	obj.SetName(desired.GetName())
	var stored string
	op, err := controllerutil.CreateOrPatch(ctx, r.Client, obj, func() error {
		stored = obj.GetResourceVersion()
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
	})
	if op == controllerutil.OperationResultUpdated && obj.GetResourceVersion() == stored {
		// The API server found nothing to change (for example a field it
		// defaults): not a change worth an Event.
		op = controllerutil.OperationResultNone
	}
	return op, err
}

// withdraw deletes the MetalLB objects rendered for the class (found by
// label, or by name when they are controlled by a class of that name)
// except those in keep. It returns "<Kind> <name>" of each deleted object.
func (r *Reconciler) withdraw(ctx context.Context, class string, keep []client.Object) ([]string, error) {
	kept := map[string]bool{}
	for _, k := range keep {
		kept[kindOf(k)+"/"+k.GetName()] = true
	}
	lists := []client.ObjectList{
		&metallbv1beta1.IPAddressPoolList{},
		&metallbv1beta1.L2AdvertisementList{},
		&metallbv1beta1.BGPAdvertisementList{},
	}
	singles := []client.Object{
		&metallbv1beta1.IPAddressPool{},
		&metallbv1beta1.L2Advertisement{},
		&metallbv1beta1.BGPAdvertisement{},
	}
	var removed []string
	for i, list := range lists {
		if err := r.List(ctx, list, client.InNamespace(r.MetalLBNamespace), client.MatchingLabels(RenderedLabels(class))); err != nil {
			return removed, err
		}
		candidates := objectsOf(list)
		single := singles[i]
		err := r.Get(ctx, types.NamespacedName{Namespace: r.MetalLBNamespace, Name: names.PoolName(class)}, single)
		switch {
		case err == nil && controlledByClass(single, class):
			candidates = append(candidates, single)
		case err != nil && !kerrors.IsNotFound(err):
			return removed, err
		}
		seen := map[string]bool{}
		for _, o := range candidates {
			key := kindOf(single) + "/" + o.GetName()
			if kept[key] || seen[key] {
				continue
			}
			seen[key] = true
			err := r.Delete(ctx, o, client.Preconditions{UID: ptrTo(o.GetUID())})
			if err != nil && !kerrors.IsNotFound(err) && !kerrors.IsConflict(err) {
				return removed, err
			}
			if err == nil {
				removed = append(removed, kindOf(single)+" "+o.GetName())
				log.FromContext(ctx).Info("removed a rendered object", "kind", kindOf(single), "namespace", o.GetNamespace(), "name", o.GetName())
			}
		}
	}
	return removed, nil
}

func ptrTo[T any](v T) *T { return &v }

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

// renderedToClass maps a MetalLB object in the MetalLB namespace to the
// class it was rendered for (by label and by controller reference), and to
// the class whose name it bears (iad-<class>), which an object of someone
// else may block.
func (r *Reconciler) renderedToClass(_ context.Context, o client.Object) []reconcile.Request {
	if o.GetNamespace() != r.MetalLBNamespace {
		return nil
	}
	set := map[string]bool{}
	if class, ok := strings.CutPrefix(o.GetName(), names.PoolName("")); ok && class != "" {
		set[class] = true
	}
	if o.GetLabels()[LabelManagedBy] == ManagedBy && o.GetLabels()[LabelClass] != "" {
		set[o.GetLabels()[LabelClass]] = true
	}
	if ref := metav1.GetControllerOf(o); ref != nil && isClassRef(*ref) {
		set[ref.Name] = true
	}
	out := make([]reconcile.Request, 0, len(set))
	for name := range set {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
	}
	return out
}

// poolToClasses maps a pool to its class and, because a pool coming, going
// or changing its addresses can settle or cause an overlap, to every class
// of the driver.
func (r *Reconciler) poolToClasses(ctx context.Context, o client.Object) []reconcile.Request {
	if o.GetNamespace() != r.MetalLBNamespace {
		return nil
	}
	return append(r.renderedToClass(ctx, o), r.ourClasses(ctx, "")...)
}

// addressToClass maps an address to its class while the class's pool does
// not require the grant label yet: its Granted condition may be the last
// one the class waits for.
func (r *Reconciler) addressToClass(ctx context.Context, o client.Object) []reconcile.Request {
	a, ok := o.(*iadv1alpha1.IPAddress)
	if !ok || a.Spec.ClassName == "" {
		return nil
	}
	pool := &metallbv1beta1.IPAddressPool{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: r.MetalLBNamespace, Name: names.PoolName(a.Spec.ClassName)}, pool); err == nil && classparams.RequiresGrant(pool, a.Spec.ClassName) {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: a.Spec.ClassName}}}
}

// otherClasses maps a class event to every other class of the driver.
func (r *Reconciler) otherClasses(ctx context.Context, o client.Object) []reconcile.Request {
	return r.ourClasses(ctx, o.GetName())
}

// ourClasses lists this driver's classes from the cache, except skip.
func (r *Reconciler) ourClasses(ctx context.Context, skip string) []reconcile.Request {
	var classes iadv1alpha1.IPAddressClassList
	if err := r.List(ctx, &classes); err != nil {
		log.FromContext(ctx).Error(err, "cannot list IPAddressClasses from the cache")
		return nil
	}
	var out []reconcile.Request
	for _, c := range classes.Items {
		if c.Spec.Provisioner == names.Provisioner && c.Name != skip {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: c.Name}})
		}
	}
	return out
}

// ownerRefsChanged passes updates that change the owner references (a
// hand-removed controller reference is repaired).
var ownerRefsChanged = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return !equality.Semantic.DeepEqual(e.ObjectOld.GetOwnerReferences(), e.ObjectNew.GetOwnerReferences())
	},
}
