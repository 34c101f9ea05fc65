// Package compact makes what the controllers' caches keep of an object
// smaller without changing what they read: managedFields dropped, and the
// keys of labels and annotations shared by every object that carries them
// instead of decoded once per object.
package compact

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
)

// maxKeys bounds the keys shared: a cluster names a few hundred label and
// annotation keys; past this many, a new key is kept as decoded.
const maxKeys = 4096

var keys = struct {
	sync.RWMutex
	m map[string]string
}{m: map[string]string{}}

// key is the one shared copy of k.
func key(k string) string {
	keys.RLock()
	s, ok := keys.m[k]
	keys.RUnlock()
	if ok {
		return s
	}
	keys.Lock()
	defer keys.Unlock()
	if s, ok := keys.m[k]; ok {
		return s
	}
	if len(keys.m) >= maxKeys {
		return k
	}
	keys.m[k] = k
	return k
}

// Keys returns m with its keys shared (nil stays nil). It builds a new
// map: the one decoded may be read elsewhere.
func Keys(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[key(k)] = v
	}
	return out
}

// Object is the transform every cache applies unless a kind has its own:
// managedFields dropped, the keys of labels and annotations shared.
// Anything without object metadata is returned as it is.
func Object(o any) (any, error) {
	obj, err := meta.Accessor(o)
	if err != nil {
		return o, nil
	}
	obj.SetManagedFields(nil)
	obj.SetLabels(Keys(obj.GetLabels()))
	obj.SetAnnotations(Keys(obj.GetAnnotations()))
	return o, nil
}

// WithoutConditions is Object, with the status conditions of a claim or an
// IPAddress dropped: for the cache of a controller that neither reads nor
// writes them. A claim's or an address's conditions are often half of what
// it takes cached; their messages alone a third.
func WithoutConditions(o any) (any, error) {
	switch v := o.(type) {
	case *iadv1alpha1.IPAddressClaim:
		v.Status.Conditions = nil
	case *iadv1alpha1.IPAddress:
		v.Status.Conditions = nil
	}
	return Object(o)
}

// ConditionStates is Object, with each status condition of a claim or an
// IPAddress kept as its type, status and reason: for the cache of a
// controller that asks whether a condition holds and never writes one.
func ConditionStates(o any) (any, error) {
	switch v := o.(type) {
	case *iadv1alpha1.IPAddressClaim:
		v.Status.Conditions = states(v.Status.Conditions)
	case *iadv1alpha1.IPAddress:
		v.Status.Conditions = states(v.Status.Conditions)
	}
	return Object(o)
}

// states are conds without their messages, times and generations, in a
// new slice (the decoded one may be read elsewhere).
func states(conds []metav1.Condition) []metav1.Condition {
	if conds == nil {
		return nil
	}
	out := make([]metav1.Condition, len(conds))
	for i, c := range conds {
		out[i] = metav1.Condition{Type: c.Type, Status: c.Status, Reason: c.Reason}
	}
	return out
}

// NameAndLabels keeps of an object its name, namespace, uid,
// resourceVersion and labels (the keys shared): what a cache of
// namespaces read only for their labels needs.
func NameAndLabels(obj any) (any, error) {
	o, err := meta.Accessor(obj)
	if err != nil {
		return obj, nil
	}
	o.SetManagedFields(nil)
	o.SetAnnotations(nil)
	o.SetOwnerReferences(nil)
	o.SetFinalizers(nil)
	o.SetLabels(Keys(o.GetLabels()))
	if ns, ok := obj.(*corev1.Namespace); ok {
		ns.Spec, ns.Status = corev1.NamespaceSpec{}, corev1.NamespaceStatus{}
	}
	return obj, nil
}
