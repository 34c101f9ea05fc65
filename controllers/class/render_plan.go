package class

import (
	"fmt"

	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/names"
)

// Labels of every object the class controller renders: LabelManagedBy
// set to ManagedBy, and LabelClass naming its class.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "metallb-iad"
	LabelClass     = names.Domain + "class"
)

// DefaultAggregationLength and DefaultAggregationLengthV6 are MetalLB's
// defaults of a BGPAdvertisement's aggregation lengths, rendered explicitly.
const (
	DefaultAggregationLength   int32 = 32
	DefaultAggregationLengthV6 int32 = 128
)

// RenderedLabels are the labels of the objects rendered for a class; they
// select them in the MetalLB namespace.
func RenderedLabels(class string) map[string]string {
	return map[string]string{LabelManagedBy: ManagedBy, LabelClass: class}
}

// AnnotationRetained, on a pool whose class is gone, names the addresses
// recorded under the class name that it keeps serving until released.
const AnnotationRetained = names.Domain + "retained-for"

// Render returns the MetalLB objects for a class: the IPAddressPool
// iad-<class>, never auto-assigned so that only Services asking for it draw
// from it, and one L2 or BGP advertisement of that name selecting only it.
// No owner reference: they outlive the class while addresses recorded
// under its name exist (Retained).
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

// TakeOver returns the owner references of an existing object named for a
// class once the class controller renders it: a controller reference to an
// IPAddressClass of that name (written by older versions, which let the
// garbage collector delete the pool with its class) is dropped, any other
// reference kept. It fails when something else controls the object.
func TakeOver(refs []metav1.OwnerReference, class string) ([]metav1.OwnerReference, error) {
	out := make([]metav1.OwnerReference, 0, len(refs))
	for _, r := range refs {
		switch {
		case isClassRef(r) && r.Name == class:
		case r.Controller != nil && *r.Controller:
			return nil, fmt.Errorf("it is controlled by %s %s already", r.Kind, r.Name)
		default:
			out = append(out, r)
		}
	}
	return out, nil
}

func isClassRef(ref metav1.OwnerReference) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == iadv1alpha1.GroupVersion.Group && ref.Kind == "IPAddressClass"
}
