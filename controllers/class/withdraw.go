package class

import (
	"context"
	"fmt"

	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cozystack/metallb-iad/internal/patch"
)

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
// those labelled for it.
func (r *Reconciler) renderedFor(ctx context.Context, class string, single client.Object) ([]client.Object, error) {
	list, err := listOf(single)
	if err != nil {
		return nil, err
	}
	if err := r.List(ctx, list, client.InNamespace(r.MetalLBNamespace), client.MatchingLabels(RenderedLabels(class))); err != nil {
		return nil, err
	}
	return objectsOf(list), nil
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
