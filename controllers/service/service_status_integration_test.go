//go:build integration

package service

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/test/fixture"
)

// countedController is the controller under test (TestMain), its client
// counting the status writes of every pass (statusWrites).
var countedController = bootstrap.NewController(Controller.Name, CacheOptions, func(d bootstrap.Deps) bootstrap.Reconciler {
	d.Client = countingClient{Client: d.Client, writes: &statusWrites}
	return &Reconciler{Deps: d}
})

// statusWrites counts the IPAddress status writes of the suite's passes,
// each pass known by its reconcile ID.
var statusWrites = passWrites{perPass: map[string]int{}}

type passWrites struct {
	mu      sync.Mutex
	total   int
	perPass map[string]int // reconcile ID and address name
	twice   []string       // the addresses a pass wrote more than once
}

func (w *passWrites) saw(ctx context.Context, address string) {
	key := string(controller.ReconcileIDFromContext(ctx)) + "/" + address
	w.mu.Lock()
	defer w.mu.Unlock()
	w.total++
	w.perPass[key]++
	if w.perPass[key] == 2 {
		w.twice = append(w.twice, address)
	}
}

// counts returns how many writes were seen, and the addresses written
// twice in a pass.
func (w *passWrites) counts() (int, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.total, append([]string(nil), w.twice...)
}

type countingClient struct {
	client.Client
	writes *passWrites
}

func (c countingClient) Status() client.SubResourceWriter {
	return countingStatus{SubResourceWriter: c.Client.Status(), writes: c.writes}
}

type countingStatus struct {
	client.SubResourceWriter
	writes *passWrites
}

func (s countingStatus) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
	if _, ok := obj.(*iadv1alpha1.IPAddress); ok {
		s.writes.saw(ctx, obj.GetName())
	}
	return s.SubResourceWriter.Patch(ctx, obj, p, opts...)
}

// TestOneStatusWritePerPass: a pass writes an address's status at most
// once (report.go). The suite's client counts the writes of every pass,
// this test's (a conflict, an attach, a detach, a Service deleted while
// attached) and those of the tests before it (the imports among them).
func TestOneStatusWritePerPass(t *testing.T) {
	ctx := context.Background()
	before, _ := statusWrites.counts()
	class(t, "sim-once", "192.0.2.112/28")
	_, addrs := boundClaim(t, "once", "ip", "sim-once", iadv1alpha1.FamilyIPv4, "192.0.2.113")
	_, taken := boundClaim(t, "once", "other", "sim-once", iadv1alpha1.FamilyIPv4, "192.0.2.114")

	squatter := lb("once", "squatter", "")
	squatter.Annotations[marks.KeyPin] = "192.0.2.114"
	suite.Create(t, squatter)
	assertConflict(t, "once", "squatter", taken[0].Name, "192.0.2.114", "claim once/other")

	suite.Create(t, lb("once", "web", "ip"))
	assertAssociated(t, "once", "web", "ip", "192.0.2.113", addrs...)
	patchAnnotations(t, "once", "web", map[string]string{iadv1alpha1.ServiceClaimAnnotation: ""})
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		assert.Nil(t, suite.GetAddress(t, addrs[0].Name).Status.AssociatedTo)
		assert.Empty(t, fixture.Ingress(suite.GetService(t, "once", "web")), "MetalLB took the address back")
	}, fixture.Timeout, fixture.Tick)

	suite.Create(t, lb("once", "next", "ip"))
	assertAssociated(t, "once", "next", "ip", "192.0.2.113", addrs...)
	require.NoError(t, c.Client.Delete(ctx, suite.GetService(t, "once", "next")))
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		assert.Nil(t, suite.GetAddress(t, addrs[0].Name).Status.AssociatedTo)
		assertEvent(t, "IPAddress", "", addrs[0].Name, corev1.EventTypeNormal, ReasonDetached, "Service once/next")
	}, fixture.Timeout, fixture.Tick)

	total, twice := statusWrites.counts()
	assert.GreaterOrEqual(t, total-before, 5, "the conflict, two associations, the detach and the deletion were counted")
	assert.Empty(t, twice, "addresses whose status a pass wrote twice")
}
