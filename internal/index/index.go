// Package index holds every cache field index the controllers use, so
// lookups go through the informer cache instead of listing per event.
package index

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
)

const (
	// AddressByClaim indexes IPAddresses by "<namespace>/<name>" of spec.claimRef.
	AddressByClaim = "iad.spec.claimRef"
	// AddressByIP indexes IPAddresses by spec.address (canonical form).
	AddressByIP = "iad.spec.address"
	// AddressByAssociation indexes IPAddresses by the Service in status.associatedTo.
	AddressByAssociation = "iad.status.associatedTo"
	// AddressByClass indexes IPAddresses by spec.className.
	AddressByClass = "iad.spec.className"
	// AddressByClassNamespace indexes IPAddresses bound to a claim by
	// "<class>/<namespace of spec.claimRef>".
	AddressByClassNamespace = "iad.spec.className.claimNamespace"
	// AddressAttaching indexes, under Attaching, the IPAddresses carrying an
	// attach grant (marks.Attaching).
	AddressAttaching = "iad.attaching"
	// Attaching is the one value of AddressAttaching.
	Attaching = "attaching"

	// ServiceByClaim indexes Services by "<namespace>/<claim>" of the claim annotation.
	ServiceByClaim = "iad.service.claim"
	// ServiceByIngressIP indexes Services by each canonical ingress IP.
	ServiceByIngressIP = "iad.service.ingressIP"
	// ServiceByPinnedIP indexes Services by each canonical IP of their pin.
	ServiceByPinnedIP = "iad.service.pinnedIP"
	// PlaceholderByAddress indexes placeholders by marks.LabelAddress.
	PlaceholderByAddress = "iad.placeholder.address"
	// PlaceholderDrawnByClass indexes allocation and warm placeholders by class:
	// addresses asked for and not in the ledger yet, answered or not.
	PlaceholderDrawnByClass = "iad.placeholder.drawnByClass"
	// WarmPlaceholderByClass indexes warm placeholders by the class they draw from.
	WarmPlaceholderByClass = "iad.placeholder.warmByClass"
	// WarmAddressByClass indexes warm IPAddresses (marks.LabelWarm) by class.
	WarmAddressByClass = "iad.spec.className.warm"

	// ClaimByClass indexes claims by the class they name (spec.className)
	// and the one the core resolved (status.className): a class's change
	// wakes both, even a claim whose first pass missed the class in a
	// cache that lagged behind its creation.
	ClaimByClass = "iad.claim.class"

	// EventByInvolvedUID indexes core/v1 Events by involvedObject.uid.
	EventByInvolvedUID = "iad.event.involvedUID"
)

// Key joins a namespace and a name the way the indexes above store them.
func Key(namespace, name string) string { return namespace + "/" + name }

// Indexer is one field index: the object kind, its name, its function,
// and how its lookups name the namespace.
type Indexer struct {
	Object client.Object
	Field  string
	Func   client.IndexerFunc
	// Lookup is how its lookups name the namespace (EitherWay for a
	// cluster-scoped kind, whose objects have one key per value anyway).
	Lookup Lookup
}

// Lookup says how every lookup of an index of a namespaced kind names the
// namespace. controller-runtime's IndexField keeps two keys per value,
// one under the object's namespace and one for every namespace, and a
// store keeps a set for each key: about 300 bytes for each value only one
// object has (a placeholder's address, a Service's ingress IP). An index
// whose lookups go one way only keeps the one key they read.
type Lookup int

const (
	// EitherWay keeps both keys: lookups in one namespace and across all.
	EitherWay Lookup = iota
	// InNamespace keeps the key of the object's namespace: every lookup
	// names it (client.InNamespace).
	InNamespace
	// AcrossNamespaces keeps the key for every namespace: no lookup names one.
	AcrossNamespaces
)

// How controller-runtime's cache reader asks a store for a field index (its
// internal FieldIndexName and KeyToNamespacedKey): List with MatchingFields
// reads ByIndex(indexPrefix+field, namespace+"/"+value), namespace being
// allNamespaces in a List across namespaces. TestOneKeyIndexes holds them
// to what IndexField registers.
const (
	indexPrefix   = "field:"
	allNamespaces = "__all_namespaces"
)

// oneKey is ix's function as a store takes it, with the one key its lookups read.
func (ix Indexer) oneKey() toolscache.IndexFunc {
	return func(o any) ([]string, error) {
		obj, ok := o.(client.Object)
		if !ok {
			return nil, fmt.Errorf("index %s: %T is not an object", ix.Field, o)
		}
		ns := obj.GetNamespace()
		if ns == "" || ix.Lookup == AcrossNamespaces {
			ns = allNamespaces
		}
		vals := ix.Func(obj)
		keys := make([]string, len(vals))
		for i, v := range vals {
			keys[i] = ns + "/" + v
		}
		return keys, nil
	}
}

// All lists every index the project defines.
var All = []Indexer{
	{&iadv1alpha1.IPAddress{}, AddressByClaim, func(o client.Object) []string {
		a := o.(*iadv1alpha1.IPAddress)
		if a.Spec.ClaimRef == nil {
			return nil
		}
		return []string{Key(a.Spec.ClaimRef.Namespace, a.Spec.ClaimRef.Name)}
	}, EitherWay},
	{&iadv1alpha1.IPAddress{}, AddressByIP, func(o client.Object) []string {
		a := o.(*iadv1alpha1.IPAddress)
		ip, err := names.ParseAddress(a.Spec.Address)
		if err != nil {
			return nil
		}
		return []string{ip.String()}
	}, EitherWay},
	{&iadv1alpha1.IPAddress{}, AddressByAssociation, func(o client.Object) []string {
		a := o.(*iadv1alpha1.IPAddress)
		if a.Status.AssociatedTo == nil || a.Status.AssociatedTo.Kind != "Service" {
			return nil
		}
		return []string{Key(a.Status.AssociatedTo.Namespace, a.Status.AssociatedTo.Name)}
	}, EitherWay},
	{&iadv1alpha1.IPAddress{}, AddressByClass, func(o client.Object) []string {
		return []string{o.(*iadv1alpha1.IPAddress).Spec.ClassName}
	}, EitherWay},
	{&iadv1alpha1.IPAddress{}, AddressByClassNamespace, func(o client.Object) []string {
		a := o.(*iadv1alpha1.IPAddress)
		if a.Spec.ClaimRef == nil {
			return nil
		}
		return []string{Key(a.Spec.ClassName, a.Spec.ClaimRef.Namespace)}
	}, EitherWay},
	{&iadv1alpha1.IPAddress{}, AddressAttaching, func(o client.Object) []string {
		if _, ok := marks.AttachingService(o.(*iadv1alpha1.IPAddress)); ok {
			return []string{Attaching}
		}
		return nil
	}, EitherWay},
	{&corev1.Service{}, ServiceByClaim, func(o client.Object) []string {
		if c := marks.ClaimOf(o); c != "" {
			return []string{Key(o.GetNamespace(), c)}
		}
		return nil
	}, AcrossNamespaces},
	{&corev1.Service{}, ServiceByIngressIP, func(o client.Object) []string {
		return marks.IngressIPs(o.(*corev1.Service))
	}, AcrossNamespaces},
	{&corev1.Service{}, ServiceByPinnedIP, func(o client.Object) []string {
		return marks.Of(o.(*corev1.Service)).PinIPs()
	}, AcrossNamespaces},
	{&corev1.Service{}, PlaceholderByAddress, func(o client.Object) []string {
		if v := o.GetLabels()[marks.LabelAddress]; v != "" {
			return []string{v}
		}
		return nil
	}, InNamespace},
	{&corev1.Service{}, PlaceholderDrawnByClass, func(o client.Object) []string {
		role := o.GetLabels()[marks.LabelPlaceholder]
		class := o.GetAnnotations()[marks.KeyClass]
		if (role != names.PlaceholderAllocation && role != names.PlaceholderWarm) || class == "" {
			return nil
		}
		return []string{class}
	}, InNamespace},
	{&corev1.Service{}, WarmPlaceholderByClass, func(o client.Object) []string {
		if class := o.GetAnnotations()[marks.KeyClass]; class != "" && o.GetLabels()[marks.LabelPlaceholder] == names.PlaceholderWarm {
			return []string{class}
		}
		return nil
	}, InNamespace},
	{&iadv1alpha1.IPAddress{}, WarmAddressByClass, func(o client.Object) []string {
		if o.GetLabels()[marks.LabelWarm] == "true" {
			return []string{o.(*iadv1alpha1.IPAddress).Spec.ClassName}
		}
		return nil
	}, EitherWay},
	{&iadv1alpha1.IPAddressClaim{}, ClaimByClass, func(o client.Object) []string {
		c := o.(*iadv1alpha1.IPAddressClaim)
		var out []string
		for _, name := range []string{c.Spec.ClassName, c.Status.ClassName} {
			if name != "" && !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
		return out
	}, AcrossNamespaces},
	{&corev1.Event{}, EventByInvolvedUID, func(o client.Object) []string {
		if uid := o.(*corev1.Event).InvolvedObject.UID; uid != "" {
			return []string{string(uid)}
		}
		return nil
	}, InNamespace},
}

// Register adds the named indexes to a manager's cache, so a controller's
// cache holds only the indexes it reads. Idempotent per manager: several
// controllers of one manager (tests) may each register an index they
// share. The cache itself knows what it indexes: a second IndexField of a
// field fails with client-go's indexer conflict (AddIndexers), and as
// every index of a field comes from All, the index already there is the
// one asked for. An index with a Lookup is added to the kind's informer
// with the one key its lookups read, under the name the cache's List asks
// for: lookups are MatchingFields as for any other.
func Register(ctx context.Context, mgr ctrl.Manager, fields ...string) error {
	want := map[string]bool{}
	for _, f := range fields {
		want[f] = true
	}
	for _, ix := range All {
		if !want[ix.Field] {
			continue
		}
		var err error
		if ix.Lookup == EitherWay {
			err = mgr.GetFieldIndexer().IndexField(ctx, ix.Object, ix.Field, ix.Func)
		} else {
			err = addOneKey(ctx, mgr.GetCache(), ix)
		}
		if err != nil && !Registered(err) {
			return err
		}
	}
	return nil
}

// addOneKey adds ix to the informer of its kind with one key per value.
func addOneKey(ctx context.Context, c cache.Cache, ix Indexer) error {
	inf, err := c.GetInformer(ctx, ix.Object)
	if err != nil {
		return err
	}
	return inf.AddIndexers(toolscache.Indexers{indexPrefix + ix.Field: ix.oneKey()})
}

// Registered reports whether err is the cache refusing an index it already
// has: client-go's store says "indexer conflict" (it has no typed error).
func Registered(err error) bool {
	return strings.Contains(err.Error(), "indexer conflict")
}
