//go:build integration

package claim

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim/draw"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/test/cluster"
	"github.com/cozystack/metallb-iad/test/fixture"
)

// TestPoolNotReadyNamesClassRefusal: a claim of a class the class
// controller refuses (its ranges overlap an older class) is told so, not
// that the pool will come.
func TestPoolNotReadyNamesClassRefusal(t *testing.T) {
	ns := namespace(t)
	suite.CreateForTest(t, fixture.Pool("decoy-"+rand.String(4), "10.10.21.0/30")) // MetalLB reports unknown pools only once it has some
	suffix := rand.String(5)
	for _, name := range []string{"c-a-" + suffix, "c-b-" + suffix} { // the same second: the name decides which is older
		suite.CreateForTest(t, cluster.Class(name, "", fixture.Addresses("10.10.20.0/30")))
	}
	suite.CreateForTest(t, fixture.Pool("c-a-"+suffix, "10.10.20.0/30"))
	refused := "c-b-" + suffix
	c := claim(t, ns, refused, iadv1alpha1.FamilyIPv4, names.Provisioner)

	ev := suite.WaitEvent(t, fixture.Of(c), ReasonPoolNotReady)
	assert.Equal(t, corev1.EventTypeWarning, ev.Type)
	assert.Contains(t, ev.Message, "IPAddressClass "+refused+" is refused")
	assert.Contains(t, ev.Message, "overlap")
	assert.Contains(t, ev.Message, "c-a-"+suffix, "it names the class it overlaps")
	assert.NotContains(t, ev.Message, "yet")
}

// reconciles is how many passes the suite's claim controller has run.
func reconciles(t require.TestingT) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	require.NoError(t, err)
	total := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if label(m, "controller") == ControllerName {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// TestEventsOncePerChange: a claim waiting on an exhausted pool is told
// once, and counted once, however many passes run over it meanwhile.
func TestEventsOncePerChange(t *testing.T) {
	ns := namespace(t)
	cl, second := exhausted(t, ns, "10.10.22.5/32")

	// Make the controller look at the claim again and again.
	before := reconciles(t)
	for i := range 5 {
		cur := &iadv1alpha1.IPAddressClaim{}
		require.NoError(t, k.Get(ctx, client.ObjectKeyFromObject(second), cur))
		orig := cur.DeepCopy()
		cur.Annotations["test.metallb-iad/touch"] = string(rune('a' + i))
		require.NoError(t, k.Patch(ctx, cur, client.MergeFrom(orig)))
	}
	require.Eventually(t, func() bool { return reconciles(t) >= before+5 }, fixture.Timeout, fixture.Tick, "the controller ran its passes")
	require.Eventually(t, func() bool { // and the last touch is among them
		cur := &iadv1alpha1.IPAddressClaim{}
		return cached.Get(ctx, client.ObjectKeyFromObject(second), cur) == nil && cur.Annotations["test.metallb-iad/touch"] == "e"
	}, fixture.Timeout, fixture.Tick)

	var count int32
	for _, e := range suite.Events(t, fixture.Of(second), ReasonPoolExhausted) {
		count += max(e.Count, 1)
	}
	assert.Equal(t, int32(1), count, "one PoolExhausted Event for one exhaustion")
	assert.Equal(t, 1.0, testutil.ToFloat64(draw.AllocationsTotal.WithLabelValues(cl, "IPv4", draw.ResultPoolExhausted)), "counted once")
}

// staleClaims serves one claim as it was, the way a cache lagging behind a
// change of the claim would.
type staleClaims struct {
	client.Client
	claim *iadv1alpha1.IPAddressClaim
}

func (s staleClaims) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if c, ok := obj.(*iadv1alpha1.IPAddressClaim); ok && key == client.ObjectKeyFromObject(s.claim) {
		s.claim.DeepCopyInto(c)
		return nil
	}
	return s.Client.Get(ctx, key, obj, opts...)
}

// TestRecordRechecksTheClaim: a pass working from a stale view of a claim
// (it still names the class whose pool assigned the placeholder an address,
// but the claim was retargeted meanwhile) does not record the address.
func TestRecordRechecksTheClaim(t *testing.T) {
	ns := namespace(t)
	cl := class(t, names.Provisioner, "", "10.10.23.7/32")
	// The live claim names a class that does not exist: the suite's
	// controller leaves it alone.
	live := claim(t, ns, "missing-"+rand.String(4), iadv1alpha1.FamilyIPv4, names.Provisioner)
	stale := live.DeepCopy()
	stale.Spec.ClassName = cl

	ph := draw.RenderPlaceholder(phNS, stale, cl, iadv1alpha1.FamilyIPv4)
	// Without a recorded class (the annotation taken off), the suite's
	// controller does not take the placeholder for a retargeted claim's
	// and leaves it to this test's pass.
	delete(ph.Annotations, marks.KeyClass)
	require.NoError(t, k.Create(ctx, ph))
	t.Cleanup(func() { _ = k.Delete(ctx, ph) })
	require.Eventually(t, func() bool {
		got := &corev1.Service{}
		return cached.Get(ctx, client.ObjectKeyFromObject(ph), got) == nil && draw.AssignedIP(got, iadv1alpha1.FamilyIPv4) == "10.10.23.7"
	}, fixture.MetalLBTimeout, fixture.Tick, "MetalLB assigns the placeholder its address, and the cache shows it")

	live0 := &claimReads{Reader: k}
	r := &Reconciler{Deps: bootstrap.Deps{Client: staleClaims{Client: cached, claim: stale}, APIReader: live0,
		Recorder: record.NewFakeRecorder(100), PlaceholderNamespace: phNS}}
	_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(live)})
	require.NoError(t, err)

	assert.Equal(t, 1, live0.n, "the pass reached the record step and read the claim from the API server")
	got := &corev1.Service{}
	require.NoError(t, k.Get(ctx, client.ObjectKeyFromObject(ph), got))
	assert.Empty(t, got.Labels[marks.LabelAddress], "nothing written on the placeholder")
	assert.Empty(t, got.Annotations[marks.KeyPin], "nothing written on the placeholder")
	err = k.Get(ctx, types.NamespacedName{Name: "ip-10-10-23-7"}, &iadv1alpha1.IPAddress{})
	assert.True(t, apierrors.IsNotFound(err), "no IPAddress for a claim that no longer names the class: %v", err)
	assert.Empty(t, drain(r.Recorder.(*record.FakeRecorder)), "nothing told")
}

// claimReads counts the claims read through it.
type claimReads struct {
	client.Reader
	n int
}

func (c *claimReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*iadv1alpha1.IPAddressClaim); ok {
		c.n++
	}
	return c.Reader.Get(ctx, key, obj, opts...)
}

// laggingLedger is a cache that has not seen the class's IPAddresses yet,
// and that shows class as a class it does not know under that name.
type laggingLedger struct {
	client.Client
	class *iadv1alpha1.IPAddressClass
}

func (l laggingLedger) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	switch o := obj.(type) {
	case *iadv1alpha1.IPAddress:
		return apierrors.NewNotFound(iadv1alpha1.GroupVersion.WithResource("ipaddresses").GroupResource(), key.Name)
	case *iadv1alpha1.IPAddressClass:
		if key.Name == l.class.Name {
			l.class.DeepCopyInto(o)
			return nil
		}
	}
	return l.Client.Get(ctx, key, obj, opts...)
}

func (l laggingLedger) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*iadv1alpha1.IPAddressList); ok {
		return nil
	}
	return l.Client.List(ctx, list, opts...)
}

// TestRecordMeetsAnEntryTheCacheLagsBehind: MetalLB assigned a claim's
// placeholder an address whose IPAddress, bound to another claim, the
// claim controller's cache does not show yet. Recording reads the ledger
// from the cache only; the IPAddress's Create meets the entry, and the
// address is given back as the cached ledger would have it: no
// LedgerMismatch, nothing written on the placeholder or the entry, and no
// new placeholder during the pause that follows a give-back.
func TestRecordMeetsAnEntryTheCacheLagsBehind(t *testing.T) {
	ns := namespace(t)
	cl := class(t, names.Provisioner, "", "10.10.24.3/32")
	entry := &iadv1alpha1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: "ip-10-10-24-3"},
		Spec: iadv1alpha1.IPAddressSpec{
			Address: "10.10.24.3", ClassName: cl,
			ClaimRef: &iadv1alpha1.ClaimReference{Namespace: "team-b", Name: "db", UID: "0d4b0c7e-0000-4000-8000-000000000002"},
			Source:   iadv1alpha1.IPAddressSource{FromClass: &iadv1alpha1.FromClassSource{}},
		},
	}
	require.NoError(t, k.Create(ctx, entry))
	t.Cleanup(func() { deleteAddress(entry) })

	// The claim names a class the suite's controller does not find, so
	// only this test's pass acts on it; that pass sees the class under
	// that name.
	ghost := "missing-" + rand.String(4)
	c := claim(t, ns, ghost, iadv1alpha1.FamilyIPv4, names.Provisioner)
	shown := &iadv1alpha1.IPAddressClass{}
	require.NoError(t, k.Get(ctx, types.NamespacedName{Name: cl}, shown))
	shown.Name = ghost

	ph := draw.RenderPlaceholder(phNS, c, cl, iadv1alpha1.FamilyIPv4)
	ph.Annotations[marks.KeyPin] = "10.10.24.3"
	delete(ph.Annotations, marks.KeyClass) // see TestRecordRechecksTheClaim
	require.NoError(t, k.Create(ctx, ph))
	t.Cleanup(func() { _ = k.Delete(ctx, ph) })
	require.Eventually(t, func() bool {
		got := &corev1.Service{}
		return cached.Get(ctx, client.ObjectKeyFromObject(ph), got) == nil && draw.AssignedIP(got, iadv1alpha1.FamilyIPv4) == "10.10.24.3"
	}, fixture.MetalLBTimeout, fixture.Tick, "MetalLB assigns the placeholder the address, and the cache shows it")

	rec := record.NewFakeRecorder(100)
	r := &Reconciler{Deps: bootstrap.Deps{Client: laggingLedger{Client: cached, class: shown}, APIReader: k,
		Recorder: rec, PlaceholderNamespace: phNS}}
	res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)})
	require.NoError(t, err)
	assert.Equal(t, draw.GiveBackPause, res.RequeueAfter, "the claim comes back when its pause is over")

	err = k.Get(ctx, client.ObjectKeyFromObject(ph), &corev1.Service{})
	assert.True(t, apierrors.IsNotFound(err), "the placeholder is deleted: the address is given back (%v)", err)

	// A pass during the pause does not draw again (the lagging ledger shows
	// nothing that would hold the claim otherwise). The pause is stretched,
	// so that a slow wait for the cache does not outlive it.
	r.pauses.HoldUntil(time.Now().Add(fixture.Timeout))
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(cached.Get(ctx, client.ObjectKeyFromObject(ph), &corev1.Service{}))
	}, fixture.Timeout, fixture.Tick, "the cache shows the placeholder gone")
	res, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)})
	require.NoError(t, err)
	assert.Positive(t, res.RequeueAfter)
	assert.LessOrEqual(t, res.RequeueAfter, fixture.Timeout, "what is left of the pause")
	err = k.Get(ctx, client.ObjectKeyFromObject(ph), &corev1.Service{})
	assert.True(t, apierrors.IsNotFound(err), "no placeholder during the pause (%v)", err)
	evs := strings.Join(drain(rec), "\n")
	assert.Contains(t, evs, ReasonLedgerAddressReturned)
	assert.NotContains(t, evs, ReasonLedgerMismatch)
	cur := &iadv1alpha1.IPAddress{}
	require.NoError(t, k.Get(ctx, client.ObjectKeyFromObject(entry), cur))
	assert.Equal(t, entry.Spec, cur.Spec, "the entry is untouched")
}
