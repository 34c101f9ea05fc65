package class

import (
	"fmt"

	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
)

// ManagedBy is the value of marks.LabelManagedBy on every object the class
// controller renders; marks.KeyClass names its class.
const ManagedBy = "metallb-iad"

// DefaultAggregationLength and DefaultAggregationLengthV6 are MetalLB's
// defaults of a BGPAdvertisement's aggregation lengths, rendered explicitly.
const (
	DefaultAggregationLength   int32 = 32
	DefaultAggregationLengthV6 int32 = 128
)

// RenderedLabels are the labels of the objects rendered for a class; they
// select them in the MetalLB namespace.
func RenderedLabels(class string) map[string]string {
	return map[string]string{marks.LabelManagedBy: ManagedBy, marks.KeyClass: class}
}

// Render returns the MetalLB objects for a class: the IPAddressPool
// iad-<class>, never auto-assigned so that only Services asking for it draw
// from it, admitting only the Services carrying the class's grant label
// (marks.WithGrant), and one L2 or BGP advertisement of that name
// selecting only it. No owner reference: they outlive the class while
// addresses recorded under its name exist (Retained).
func Render(class *iadv1alpha1.IPAddressClass, p classparams.Parameters, namespace string) (*metallbv1beta1.IPAddressPool, client.Object) {
	name := names.PoolName(class.Name)
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Namespace: namespace,
			Name:      name,
			Labels:    RenderedLabels(class.Name),
		}
	}
	addresses := make([]string, 0, len(p.Addresses))
	for _, r := range p.Addresses {
		addresses = append(addresses, r.Text)
	}
	pool := &metallbv1beta1.IPAddressPool{
		ObjectMeta: meta(),
		Spec: metallbv1beta1.IPAddressPoolSpec{
			Addresses:     addresses,
			AutoAssign:    ptr.To(false),
			AvoidBuggyIPs: p.AvoidBuggyIPs,
		},
	}
	marks.WithGrant(pool, class.Name)
	if p.Advertisement == classparams.AdvertisementBGP {
		adv := &metallbv1beta1.BGPAdvertisement{ObjectMeta: meta()}
		adv.Spec.IPAddressPools = []string{name}
		if b := p.BGP; b != nil {
			adv.Spec.Peers = b.Peers
			adv.Spec.Communities = b.Communities
			adv.Spec.LocalPref = b.LocalPref
			adv.Spec.AggregationLength = b.AggregationLength
			adv.Spec.AggregationLengthV6 = b.AggregationLengthV6
		}
		// MetalLB's CRD defaults both lengths; rendering the defaults keeps
		// the rendered spec equal to the stored one, so nothing is re-patched.
		if adv.Spec.AggregationLength == nil {
			adv.Spec.AggregationLength = ptr.To(DefaultAggregationLength)
		}
		if adv.Spec.AggregationLengthV6 == nil {
			adv.Spec.AggregationLengthV6 = ptr.To(DefaultAggregationLengthV6)
		}
		return pool, adv
	}
	adv := &metallbv1beta1.L2Advertisement{ObjectMeta: meta()}
	adv.Spec.IPAddressPools = []string{name}
	if l := p.L2; l != nil {
		adv.Spec.Interfaces = l.Interfaces
		adv.Spec.NodeSelectors = l.NodeSelectors
	}
	return pool, adv
}

// TakeOver checks that nothing else controls an existing object named for
// a class before the class controller renders it; its owner references
// stay as they are.
func TakeOver(refs []metav1.OwnerReference) error {
	for _, r := range refs {
		if r.Controller != nil && *r.Controller {
			return fmt.Errorf("it is controlled by %s %s already", r.Kind, r.Name)
		}
	}
	return nil
}

// errControlledElsewhere is returned by apply when the object to render
// exists and is controlled by something other than the class.
type errControlledElsewhere struct{ msg string }

func (e errControlledElsewhere) Error() string { return e.msg }

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

// merge makes obj what desired renders: our labels merged in, the
// retained-for note dropped, the spec replaced (setSpec). Other labels,
// annotations and owners stay.
func merge(obj, desired client.Object, setSpec func()) error {
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	for k, v := range desired.GetLabels() {
		labels[k] = v
	}
	obj.SetLabels(labels)
	if ann := obj.GetAnnotations(); ann[marks.KeyRetained] != "" {
		delete(ann, marks.KeyRetained) // the class is back
		obj.SetAnnotations(ann)
	}
	if err := TakeOver(obj.GetOwnerReferences()); err != nil {
		return errControlledElsewhere{msg: controlledElsewhereMessage(desired, err)}
	}
	setSpec()
	return nil
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
// carries RenderedLabels of the class.
func controlledByClass(o metav1.Object, class string) bool {
	l := o.GetLabels()
	return l[marks.LabelManagedBy] == ManagedBy && l[marks.KeyClass] == class
}
