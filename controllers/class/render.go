package class

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cozystack/metallb-iad/internal/phase"
)

// cacheLagRetry is how soon a render is retried when the cache has not yet
// seen an object the API server already has.
const cacheLagRetry = 200 * time.Millisecond

// render is the phase that renders the admitted class: it checks both
// names, creates or patches the pool (with the grant selector) and the
// advertisement, then withdraws anything else rendered for the class (an
// advertisement of the other kind).
func (r *Reconciler) render(ctx context.Context, s *scope) (phase.Result, error) {
	pool, adv := Render(s.class, s.params, r.MetalLBNamespace)
	objs := []client.Object{pool, adv}
	// Both names are checked before either is written: nothing is rendered
	// half-way.
	for _, obj := range objs {
		msg, err := r.controlledElsewhere(ctx, obj)
		if err != nil {
			return phase.Next(), err
		}
		if msg != "" {
			r.nameTaken(ctx, s, msg)
			return phase.Halt(ReasonPoolNameTaken, 0), nil
		}
	}
	writes, err := r.write(ctx, s, objs)
	var elsewhere errControlledElsewhere
	switch {
	case errors.As(err, &elsewhere):
		r.nameTaken(ctx, s, elsewhere.msg)
		return phase.Halt(ReasonPoolNameTaken, 0), nil
	case kerrors.IsAlreadyExists(err):
		return phase.WaitFor("the cache to show the pool or advertisement the API server has", cacheLagRetry), nil
	case err != nil:
		return phase.Next(), err
	}
	recordRendered(s.class.Name, s.params)
	r.unsettled.Delete(s.class.Name)
	r.reported.Forget(s.class.Name)
	if len(writes) > 0 {
		log.FromContext(ctx).Info("class rendered", "namespace", r.MetalLBNamespace, "pool", pool.Name, "advertisement", kindOf(adv), "changes", writes)
		r.Recorder.Event(s.class, corev1.EventTypeNormal, ReasonRendered, msgRendered(r.MetalLBNamespace, pool, adv, s.params, writes))
	}
	return phase.Next(), nil
}

// nameTaken refuses the class with PoolNameTaken.
func (r *Reconciler) nameTaken(ctx context.Context, s *scope, msg string) {
	r.refuse(ctx, s.class, &refusal{reason: ReasonPoolNameTaken, message: msg, params: &s.params})
}

// write applies objs in turn, then withdraws what else was rendered for
// the class. It returns the writes made ("<op> <Kind> <name>"); an
// object it cannot write is an error: errControlledElsewhere, or
// AlreadyExists where the cache has not shown it yet.
func (r *Reconciler) write(ctx context.Context, s *scope, objs []client.Object) ([]string, error) {
	var writes []string
	for _, obj := range objs {
		op, err := r.apply(ctx, obj)
		if err != nil {
			return nil, err
		}
		if op != controllerutil.OperationResultNone {
			writes = append(writes, fmt.Sprintf("%s %s %s", op, kindOf(obj), obj.GetName()))
		}
	}
	removed, err := r.withdraw(ctx, s.class.Name, objs)
	if err != nil {
		return nil, err
	}
	for _, o := range removed {
		writes = append(writes, "removed "+o)
	}
	return writes, nil
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
	if err := TakeOver(existing.GetOwnerReferences()); err != nil {
		return controlledElsewhereMessage(desired, err), nil
	}
	return "", nil
}

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
