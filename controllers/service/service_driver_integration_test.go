//go:build integration

package service

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim"
	"github.com/cozystack/metallb-iad/controllers/ipaddress"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/test/fixture"
)

// What the tests that need real placeholders share: the reference core,
// the claim controller and the IPAddress controller beside the suite's
// service controller, claims they provision, and the waits and the watch
// on the holds. The stories of the whole system live in test/e2e.

// startDriver runs, for the rest of the test, the reference core, the claim
// controller and the IPAddress controller (the latter two as their own
// ServiceAccounts), beside the suite's service controller; heldPartner
// stays out of the way.
func startDriver(t testing.TB) {
	t.Helper()
	pausePartner(t)
	suite.StartCore(t)
	suite.StartController(t, claim.Controller)
	suite.StartController(t, ipaddress.Controller)
}

// holdWatch follows every change of every Service through a watch, and
// checks after each one that each watched IP is held: shown in
// status.loadBalancer.ingress by one of its address's placeholders or by
// one of the watched workloads. The watch delivers the changes in order,
// so every state the API server went through is checked, not a sample.
type holdWatch struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	states int
	gaps   []string
	errs   []string
	// shared counts, per IP, the times it came to be held by a placeholder
	// and a workload at once: the proof that the two shared it.
	shared map[string]int
	both   map[string]bool
}

// watchHeld starts watching. ips maps each watched IP to its IPAddress name.
func watchHeld(t *testing.T, ips map[string]string, workloads ...client.ObjectKey) *holdWatch {
	t.Helper()
	wc, err := client.NewWithWatch(c.Config, client.Options{Scheme: c.Client.Scheme()})
	require.NoError(t, err)
	var list corev1.ServiceList
	require.NoError(t, wc.List(context.Background(), &list))
	state := map[client.ObjectKey]*corev1.Service{}
	for i := range list.Items {
		state[client.ObjectKeyFromObject(&list.Items[i])] = &list.Items[i]
	}
	isWorkload := map[client.ObjectKey]bool{}
	for _, k := range workloads {
		isWorkload[k] = true
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &holdWatch{cancel: cancel, done: make(chan struct{}), shared: map[string]int{}, both: map[string]bool{}}
	w.check(state, ips, isWorkload, list.ResourceVersion)
	go func() {
		defer close(w.done)
		rv := list.ResourceVersion
		for ctx.Err() == nil {
			watcher, err := wc.Watch(ctx, &corev1.ServiceList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
			if err != nil {
				if ctx.Err() == nil {
					w.fail("watch: %v", err)
				}
				return
			}
			for ev := range watcher.ResultChan() {
				switch ev.Type {
				case watch.Added, watch.Modified, watch.Deleted:
					svc := ev.Object.(*corev1.Service)
					rv = svc.ResourceVersion
					if ev.Type == watch.Deleted {
						delete(state, client.ObjectKeyFromObject(svc))
					} else {
						state[client.ObjectKeyFromObject(svc)] = svc
					}
					w.check(state, ips, isWorkload, rv)
				case watch.Error:
					if ctx.Err() == nil {
						w.fail("watch error: %v", ev.Object)
					}
				}
			}
			watcher.Stop()
		}
	}()
	t.Cleanup(w.finish)
	return w
}

func (w *holdWatch) fail(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errs = append(w.errs, fmt.Sprintf(format, args...))
}

// check judges one state of the cluster's Services.
func (w *holdWatch) check(state map[client.ObjectKey]*corev1.Service, ips map[string]string, isWorkload map[client.ObjectKey]bool, rv string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.states++
	for ip, addr := range ips {
		byPlaceholder, byWorkload := false, false
		for key, s := range state {
			if !marks.Holds(s, ip) {
				continue
			}
			byPlaceholder = byPlaceholder || (s.Namespace == placeholderNS && s.Labels[names.LabelAddress] == addr)
			byWorkload = byWorkload || isWorkload[key]
		}
		if !byPlaceholder && !byWorkload {
			w.gaps = append(w.gaps, fmt.Sprintf("%s held by nobody at resourceVersion %s", ip, rv))
		}
		both := byPlaceholder && byWorkload
		if both && !w.both[ip] {
			w.shared[ip]++
		}
		w.both[ip] = both
	}
}

// finish stops watching; it may be called more than once.
func (w *holdWatch) finish() {
	w.cancel()
	<-w.done
}

// assertNeverUnheld stops watching and asserts that no state of the cluster
// had a watched IP held by nobody, and that each IP was shared by a
// placeholder and a workload at least handoffs times (once per shared
// handoff).
func (w *holdWatch) assertNeverUnheld(t *testing.T, handoffs int) {
	t.Helper()
	w.finish()
	w.mu.Lock()
	defer w.mu.Unlock()
	assert.Empty(t, w.errs, "the watch ran without errors")
	assert.Empty(t, w.gaps, "no state of the cluster has a watched IP held by nobody")
	for ip := range w.both {
		assert.GreaterOrEqual(t, w.shared[ip], handoffs, "%s was shared by a placeholder and the workload in each handoff", ip)
	}
	t.Logf("%d states checked, %d unheld, shared: %v", w.states, len(w.gaps), w.shared)
}

// provisioned creates a claim and waits until the driver and the core have
// bound it and a placeholder holds each of its addresses. It returns the
// addresses, sorted by name.
func provisioned(t *testing.T, ns, name, class string, family iadv1alpha1.IPFamily) []*iadv1alpha1.IPAddress {
	t.Helper()
	cl := createClaim(t, ns, name, class, family)
	var addrs []*iadv1alpha1.IPAddress
	require.EventuallyWithT(t, func(t *assert.CollectT) {
		addrs = nil
		got := &iadv1alpha1.IPAddressClaim{}
		require.NoError(t, c.Client.Get(context.Background(), client.ObjectKeyFromObject(cl), got))
		require.Equal(t, iadv1alpha1.ClaimBound, got.Status.Phase)
		require.Len(t, got.Status.Addresses, len(family.Families()))
		for _, ca := range got.Status.Addresses {
			addrs = append(addrs, suite.GetAddress(t, ca.Name))
		}
	}, fixture.MetalLBTimeout, fixture.Tick, "claim %s/%s is bound", ns, name)
	sort.Slice(addrs, func(i, j int) bool { return addrs[i].Name < addrs[j].Name })
	for _, a := range addrs {
		assertHeld(t, a.Name, a.Spec.Address)
	}
	return addrs
}

// assertHeld waits until the address is unattached, reports Held True, and
// a placeholder in the placeholder namespace holds exactly its IP.
func assertHeld(t *testing.T, address, ip string) {
	t.Helper()
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		a := suite.GetAddress(t, address)
		assert.Nil(t, a.Status.AssociatedTo)
		assert.True(t, conditions.IsTrue(a.Status.Conditions, conditions.Held), "Held")
		held := false
		for _, ph := range suite.PlaceholdersOf(t, address) {
			held = held || (len(fixture.Ingress(&ph)) == 1 && fixture.Ingress(&ph)[0] == ip)
		}
		assert.True(t, held, "a placeholder holds %s", ip)
	}, fixture.MetalLBTimeout, fixture.Tick)
}
