package class

import (
	"context"
	"slices"
	"strings"

	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
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

// refusal is why a class is not rendered.
type refusal struct {
	reason  string
	message string
	// params are the parsed parameters, nil when they did not parse.
	params *classparams.Parameters
}

// admit is the phase that admits the class's parameters (judge): a refused
// class is reported and the pass ends, its previous rendering kept.
func (r *Reconciler) admit(ctx context.Context, s *scope) (phase.Result, error) {
	// Until it is rendered, a change of its ledger brings the class back:
	// one made while this pass reads it too.
	r.unsettled.Store(s.class.Name, true)
	params, ref, err := r.judge(ctx, s.class)
	if err != nil {
		return phase.Next(), err
	}
	s.params = params
	if ref != nil {
		r.refuse(ctx, s.class, ref)
		return phase.Halt(ref.reason, 0), nil
	}
	return phase.Next(), nil
}

// judge checks the class name, parses the parameters and looks for an
// overlap or a dropped address in use. It returns the parameters to
// render, or a refusal.
func (r *Reconciler) judge(ctx context.Context, class *iadv1alpha1.IPAddressClass) (classparams.Parameters, *refusal, error) {
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
	// The cache may not hold a pool or class created a moment ago, and
	// MetalLB refuses its whole configuration when two pools overlap: before
	// the pool's ranges change, look on the API server itself.
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

// reportAdoptOverlap records the OverlapsLivePool Warning once per overlap
// of a class with adoptExisting; o nil forgets it.
func (r *Reconciler) reportAdoptOverlap(ctx context.Context, class *iadv1alpha1.IPAddressClass, o *classparams.Overlap) {
	if o == nil {
		r.adoptReported.Forget(class.Name)
		return
	}
	msg := classparams.AdoptOverlapMessage(o, r.MetalLBNamespace+"/"+names.PoolName(class.Name))
	if !r.adoptReported.Changed(class.Name, string(class.UID)+"\x00"+msg) {
		return
	}
	log.FromContext(ctx).Info("rendering over a pool this driver did not render, to adopt what MetalLB assigned from it", "pool", o.With.Pool)
	r.Recorder.Event(class, corev1.EventTypeWarning, ReasonOverlapsLivePool, msg)
}

// refuse reports a refusal, once per change of it; the previous rendering
// stays as it is.
func (r *Reconciler) refuse(ctx context.Context, class *iadv1alpha1.IPAddressClass, ref *refusal) {
	recordRefused(class.Name, ref.reason, ref.params)
	if !r.reported.Changed(class.Name, string(class.UID)+"\x00"+ref.reason+"\x00"+ref.message) {
		log.FromContext(ctx).V(1).Info("class still refused", "reason", ref.reason)
		return
	}
	log.FromContext(ctx).Info("class refused; its previous rendering, if any, is kept", "reason", ref.reason, "message", ref.message)
	r.Recorder.Event(class, corev1.EventTypeWarning, ref.reason, ref.message)
}

// dropped lists the live addresses of the class that the pool rendered for
// it (from the cache) contains and the new parameters do not.
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
	rendered := classparams.PoolRanges(pool.Spec.Addresses)
	if classparams.Keeps(rendered, params.Addresses) {
		return nil, nil // every pass of an unchanged class: no ledger read
	}
	var addrs iadv1alpha1.IPAddressList
	if err := r.List(ctx, &addrs, client.MatchingFields{index.AddressByClass: class.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	// The entries share the cache's memory: read here, never written.
	return classparams.Dropped(addrs.Items, rendered, params.Addresses), nil
}

// overlap returns, as read from from, the first overlap of the class's
// addresses with what they must not overlap, and the live pools they may
// overlap (adoptExisting).
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

// occupants lists, as read from from, what the class's addresses must not
// overlap: this driver's older classes (oldest first), then every other
// IPAddressPool in the MetalLB namespace (by name).
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
		if p.Labels[marks.LabelManagedBy] == ManagedBy {
			o.Class = p.Labels[marks.KeyClass]
		}
		out = append(out, o)
	}
	return out, nil
}
