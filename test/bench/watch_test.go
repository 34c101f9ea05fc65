package bench

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/test/cluster"
)

// watcher timestamps the moment the benchmark's informers first see an
// object reach a state. Expectations are registered before the action that
// should lead there, so the clock starts before anything can happen.
type watcher struct {
	mu    sync.Mutex
	waits map[string][]*expectation
}

// expectation is one awaited state of one object.
type expectation struct {
	key  string
	cond func(client.Object) bool
	at   time.Time
	done chan struct{}
	last client.Object
}

// Keys an object is known by: claims by namespace/name, addresses by name
// and by the claim they are bound to, Services by namespace/name, and the
// driver's placeholders also by the claim they draw for and by the address
// they hold.
func claimKey(ns, name string) string          { return "claim/" + ns + "/" + name }
func addressKey(name string) string            { return "address/" + name }
func addressOfKey(ns, claim string) string     { return "address-of/" + ns + "/" + claim }
func serviceKey(ns, name string) string        { return "service/" + ns + "/" + name }
func placeholderOfKey(ns, claim string) string { return "placeholder-of/" + ns + "/" + claim }
func holdOfKey(address string) string          { return "hold-of/" + address }

func keysOf(o any) []string {
	switch v := o.(type) {
	case *iadv1alpha1.IPAddressClaim:
		return []string{claimKey(v.Namespace, v.Name)}
	case *iadv1alpha1.IPAddress:
		ks := []string{addressKey(v.Name)}
		if r := v.Spec.ClaimRef; r != nil {
			ks = append(ks, addressOfKey(r.Namespace, r.Name))
		}
		return ks
	case *corev1.Service:
		ks := []string{serviceKey(v.Namespace, v.Name)}
		if v.Namespace != cluster.DriverNamespace {
			return ks
		}
		if ns, claim := v.Annotations[marks.AnnotationClaimNamespace], v.Annotations[marks.AnnotationClaimName]; ns != "" && claim != "" {
			ks = append(ks, placeholderOfKey(ns, claim))
		}
		if a := v.Labels[marks.LabelAddress]; a != "" {
			ks = append(ks, holdOfKey(a))
		}
		return ks
	}
	return nil
}

// newWatcher starts informers on claims, addresses and Services.
func newWatcher(ctx context.Context, cfg *rest.Config) (*watcher, error) {
	w := &watcher{waits: map[string][]*expectation{}}
	ca, err := cache.New(cfg, cache.Options{Scheme: bootstrap.Scheme(), DefaultTransform: cache.TransformStripManagedFields()})
	if err != nil {
		return nil, err
	}
	for _, obj := range []client.Object{&iadv1alpha1.IPAddressClaim{}, &iadv1alpha1.IPAddress{}, &corev1.Service{}} {
		inf, err := ca.GetInformer(ctx, obj)
		if err != nil {
			return nil, err
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { w.notify(o) },
			UpdateFunc: func(_, o any) { w.notify(o) },
		}); err != nil {
			return nil, err
		}
	}
	go func() { _ = ca.Start(ctx) }()
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !ca.WaitForCacheSync(sctx) {
		return nil, fmt.Errorf("the benchmark's informers did not sync")
	}
	return w, nil
}

func (w *watcher) notify(o any) {
	obj, ok := o.(client.Object)
	if !ok {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range keysOf(o) {
		waits := w.waits[k]
		if len(waits) == 0 {
			continue
		}
		kept := waits[:0]
		for _, x := range waits {
			x.last = obj
			if x.cond(obj) {
				x.at = now
				close(x.done)
				continue
			}
			kept = append(kept, x)
		}
		if len(kept) == 0 {
			delete(w.waits, k)
		} else {
			w.waits[k] = kept
		}
	}
}

// expect registers an awaited state; register it before acting.
func (w *watcher) expect(key string, cond func(client.Object) bool) *expectation {
	x := &expectation{key: key, cond: cond, done: make(chan struct{})}
	w.mu.Lock()
	w.waits[key] = append(w.waits[key], x)
	w.mu.Unlock()
	return x
}

// forget drops the expectations of xs still unmet (states an operation
// never reached), so they are not tested against every later event.
func (w *watcher) forget(xs ...*expectation) {
	w.mu.Lock()
	defer w.mu.Unlock()
	drop := map[*expectation]bool{}
	keys := map[string]bool{}
	for _, x := range xs {
		drop[x], keys[x.key] = true, true
	}
	for k := range keys {
		kept := w.waits[k][:0]
		for _, x := range w.waits[k] {
			if !drop[x] {
				kept = append(kept, x)
			}
		}
		if len(kept) == 0 {
			delete(w.waits, k)
		} else {
			w.waits[k] = kept
		}
	}
}

// At is when the state was first seen (zero while it was not).
func (x *expectation) At() time.Time {
	select {
	case <-x.done:
		return x.at
	default:
		return time.Time{}
	}
}

// awaitAll waits until every expectation is met, or reports the ones that
// were not (with the last state seen) after timeout.
func (w *watcher) awaitAll(ctx context.Context, xs []*expectation, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, x := range xs {
		select {
		case <-x.done:
		case <-ctx.Done():
			return w.pending(xs, timeout)
		}
	}
	return nil
}

func (w *watcher) pending(xs []*expectation, timeout time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var missing []string
	for _, x := range xs {
		if x.At().IsZero() {
			missing = append(missing, fmt.Sprintf("%s (last seen: %s)", x.key, describe(x.last)))
		}
	}
	sort.Strings(missing)
	n := len(missing)
	if n > 5 {
		missing = append(missing[:5], "...")
	}
	return fmt.Errorf("%d of %d did not converge within %s: %s", n, len(xs), timeout, strings.Join(missing, "; "))
}

// describe summarizes an object's state for a failure message.
func describe(o client.Object) string {
	switch v := o.(type) {
	case nil:
		return "never"
	case *iadv1alpha1.IPAddressClaim:
		return fmt.Sprintf("phase %q, addresses %v", v.Status.Phase, v.Status.Addresses)
	case *iadv1alpha1.IPAddress:
		return fmt.Sprintf("phase %q, associatedTo %v, conditions %v", v.Status.Phase, v.Status.AssociatedTo, v.Status.Conditions)
	case *corev1.Service:
		return fmt.Sprintf("annotations %v, ingress %v", v.Annotations, v.Status.LoadBalancer.Ingress)
	}
	return fmt.Sprintf("%T", o)
}
