package draw

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/phase"
)

// fakeDrawer answers the pipeline with fixed verdicts and records what it
// was asked and told.
type fakeDrawer struct {
	judged, recorded LedgerAnswer
	entry            *iadv1alpha1.IPAddress
	handedOver       bool
	calls            []string
	news             []NewsKind
}

func (d *fakeDrawer) Placeholder() *corev1.Service {
	return RenderPlaceholder("ph", testClaim(iadv1alpha1.FamilyIPv4), "public", iadv1alpha1.FamilyIPv4)
}

func (d *fakeDrawer) Judge(context.Context, string, string) (LedgerAnswer, *iadv1alpha1.IPAddress, error) {
	d.calls = append(d.calls, "judge")
	return d.judged, d.entry, nil
}

func (d *fakeDrawer) RecordEntry(context.Context, *corev1.Service, string, string, *iadv1alpha1.IPAddress) (LedgerAnswer, *iadv1alpha1.IPAddress, error) {
	d.calls = append(d.calls, "recordEntry")
	return d.recorded, d.entry, nil
}

func (d *fakeDrawer) HandOver(ph *corev1.Service, _ *iadv1alpha1.IPAddress) func() {
	if d.handedOver {
		return nil
	}
	return func() { ph.Labels[marks.LabelPlaceholder] = names.PlaceholderHold }
}

func (d *fakeDrawer) Report(_ context.Context, n News) phase.Result {
	d.news = append(d.news, n.Kind)
	return phase.Next()
}

func pipelineClient(t *testing.T, objs ...client.Object) client.Client {
	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	require.NoError(t, iadv1alpha1.AddToScheme(s))
	b := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...)
	for _, ix := range index.All {
		if ix.Field == index.PlaceholderByAddress {
			b = b.WithIndex(ix.Object, ix.Field, ix.Func)
		}
	}
	return b.Build()
}

func TestDrawRecord(t *testing.T) {
	entry := testAddress("ip-192-0-2-1", "192.0.2.1", nil)
	tests := []struct {
		name      string
		d         fakeDrawer
		pin       string
		bound     bool
		calls     []string
		news      []NewsKind
		wantLabel string // the placeholder's role afterwards; "" when deleted
	}{
		{name: "free: record, then hand over", d: fakeDrawer{judged: LedgerFree, recorded: LedgerOurs, entry: &entry},
			bound: true, calls: []string{"judge", "recordEntry"}, news: []NewsKind{NewsHandedOver}, wantLabel: names.PlaceholderHold},
		{name: "handed over already: nothing written", d: fakeDrawer{judged: LedgerOurs, recorded: LedgerOurs, entry: &entry, handedOver: true},
			bound: true, calls: []string{"judge", "recordEntry"}, wantLabel: names.PlaceholderAllocation},
		{name: "taken: give back", d: fakeDrawer{judged: LedgerTaken, entry: &entry},
			calls: []string{"judge"}, news: []NewsKind{NewsGaveBack}},
		{name: "taken once recorded: give back", d: fakeDrawer{judged: LedgerFree, recorded: LedgerTaken, entry: &entry},
			calls: []string{"judge", "recordEntry"}, news: []NewsKind{NewsGaveBack}},
		{name: "the entry is going: wait", d: fakeDrawer{judged: LedgerGoing, entry: &entry},
			calls: []string{"judge"}, news: []NewsKind{NewsEntryGoing}, wantLabel: names.PlaceholderAllocation},
		{name: "pinned elsewhere: wait for MetalLB", d: fakeDrawer{judged: LedgerFree}, pin: "192.0.2.9",
			calls: []string{"judge"}, news: []NewsKind{NewsPinnedElsewhere}, wantLabel: names.PlaceholderAllocation},
		{name: "nothing recorded this pass", d: fakeDrawer{judged: LedgerFree, recorded: LedgerFree},
			calls: []string{"judge", "recordEntry"}, news: []NewsKind{NewsUnrecorded}, wantLabel: names.PlaceholderAllocation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			ph := tt.d.Placeholder()
			ph.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}}
			if tt.pin != "" {
				ph.Annotations[marks.KeyPin] = tt.pin
			}
			c := pipelineClient(t, ph)
			require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(ph), ph))
			d := Draw{Deps: bootstrap.Deps{Client: c}, Owner: &tt.d, Class: "public", F: iadv1alpha1.FamilyIPv4, What: "placeholder"}

			bound, _, err := d.Record(ctx, ph)
			require.NoError(t, err)
			assert.Equal(t, tt.bound, bound)
			assert.Equal(t, tt.calls, tt.d.calls)
			assert.Equal(t, tt.news, tt.d.news)
			got := &corev1.Service{}
			err = c.Get(ctx, client.ObjectKeyFromObject(ph), got)
			if tt.wantLabel == "" {
				assert.True(t, apierrors.IsNotFound(err), "given back: %v", err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantLabel, got.Labels[marks.LabelPlaceholder])
		})
	}
}

func TestDrawCreate(t *testing.T) {
	ctx := context.Background()
	c := pipelineClient(t)
	dr := &fakeDrawer{}
	d := Draw{Deps: bootstrap.Deps{Client: c, APIReader: c}, Owner: dr, Class: "public", F: iadv1alpha1.FamilyIPv4, What: "placeholder"}
	_, err := d.CreatePlaceholder(ctx)
	require.NoError(t, err)
	assert.Equal(t, []NewsKind{NewsCreated}, dr.news)
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(dr.Placeholder()), &corev1.Service{}))

	res, err := d.CreatePlaceholder(ctx)
	require.NoError(t, err)
	assert.Equal(t, []NewsKind{NewsCreated}, dr.news, "one that exists is not news")
	assert.Equal(t, phase.Waiting, res.State)
}

func TestDrawDescribe(t *testing.T) {
	d := Draw{Class: "public", What: "warm placeholder"}
	assert.Equal(t, "warm placeholder for class public", d.describe(RenderWarmPlaceholder("ph", "public", iadv1alpha1.FamilyIPv4)))
	d.What = "placeholder"
	assert.Equal(t, "placeholder alloc-ipv4-"+string(testUID), d.describe((&fakeDrawer{}).Placeholder()))
}

func TestDrawStart(t *testing.T) {
	ctx := context.Background()
	c := pipelineClient(t)
	dr := &fakeDrawer{}
	d := Draw{Deps: bootstrap.Deps{Client: c, APIReader: c}, Owner: dr, Class: "public", F: iadv1alpha1.FamilyIPv4, What: "placeholder"}
	created, _, err := d.StartPlaceholder(ctx)
	require.NoError(t, err)
	assert.True(t, created)
	assert.Equal(t, []NewsKind{NewsCreated}, dr.news)
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(dr.Placeholder()), &corev1.Service{}))

	created, res, err := d.StartPlaceholder(ctx)
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, []NewsKind{NewsCreated}, dr.news, "one that exists is not news")
	assert.Equal(t, phase.Waiting, res.State)
}

func TestPlaceholderHolds(t *testing.T) {
	ph := func(name, address, ip string, deleting bool) *corev1.Service {
		s := RenderPlaceholder("ph", testClaim(iadv1alpha1.FamilyIPv4), "public", iadv1alpha1.FamilyIPv4)
		s.Name = name
		s.Labels[marks.LabelClaimUID] = "uid-" + name
		if address != "" {
			s.Labels[marks.LabelAddress] = address
		}
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
		if deleting {
			s.DeletionTimestamp = &metav1.Time{}
		}
		return s
	}
	addr := func(name, ip, uid string) *iadv1alpha1.IPAddress {
		a := testAddress(name, ip, &iadv1alpha1.ClaimReference{Namespace: "tenant", Name: "web", UID: uid})
		return &a
	}
	var h Holds
	events := h.Handler()
	hold, alloc, moved := ph("hold", "ip-192-0-2-1", "192.0.2.1", false), ph("alloc", "", "192.0.2.2", false), ph("moved", "ip-192-0-2-3", "192.0.2.3", false)
	for _, s := range []*corev1.Service{hold, alloc, moved, ph("gone", "ip-192-0-2-4", "192.0.2.4", true)} {
		events.OnAdd(s, true)
	}
	events.OnUpdate(moved, ph("moved", "ip-192-0-2-3", "192.0.2.9", false))
	assert.True(t, h.HeldBy(addr("ip-192-0-2-1", "192.0.2.1", "other"), "192.0.2.1"), "by its hold")
	assert.True(t, h.HeldBy(addr("ip-192-0-2-2", "192.0.2.2", "uid-alloc"), "192.0.2.2"), "by its claim's allocation placeholder")
	assert.False(t, h.HeldBy(addr("ip-192-0-2-2", "192.0.2.2", "uid-other"), "192.0.2.2"), "another claim's placeholder")
	assert.False(t, h.HeldBy(addr("ip-192-0-2-3", "192.0.2.3", "other"), "192.0.2.3"), "labelled with it, holding another IP now")
	assert.False(t, h.HeldBy(addr("ip-192-0-2-4", "192.0.2.4", "uid-gone"), "192.0.2.4"), "being deleted")

	events.OnUpdate(hold, ph("hold", "ip-192-0-2-1", "192.0.2.1", true))
	assert.False(t, h.HeldBy(addr("ip-192-0-2-1", "192.0.2.1", "other"), "192.0.2.1"), "its hold is being deleted")
	events.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "ph/alloc", Obj: alloc})
	assert.False(t, h.HeldBy(addr("ip-192-0-2-2", "192.0.2.2", "uid-alloc"), "192.0.2.2"), "gone, seen late")
	events.OnDelete(ph("moved", "ip-192-0-2-3", "192.0.2.9", false))
	assert.Empty(t, h.n, "nothing counted once every placeholder is gone or going")
}
