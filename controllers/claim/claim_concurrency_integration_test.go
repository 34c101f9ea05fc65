//go:build integration

package claim

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim/draw"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/placeholder"
	"github.com/cozystack/metallb-iad/test/cluster"
	"github.com/cozystack/metallb-iad/test/fixture"
)

// countingClient counts the writes a reconciler attempts, so a test can
// tell that a manager took part.
type countingClient struct {
	client.Client
	writes atomic.Int64
}

func (c *countingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.writes.Add(1)
	return c.Client.Create(ctx, obj, opts...)
}

func (c *countingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c.writes.Add(1)
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *countingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c.writes.Add(1)
	return c.Client.Delete(ctx, obj, opts...)
}

// startSecondManager runs another claim controller beside the one TestMain
// started, as the same ServiceAccount with leader election off, until the
// test ends. It returns the client its reconciler writes through.
func startSecondManager(t *testing.T) *countingClient {
	t.Helper()
	o := &bootstrap.Options{
		Controller: "claim", LeaderElect: false, MetricsBindAddress: "0", HealthProbeBindAddress: "0",
		PlaceholderNamespace: phNS, MetalLBNamespace: cluster.MetalLBNamespace,
	}
	mgr, err := bootstrap.NewManager(suite.ControllerConfig(), o, CacheOptions(o))
	require.NoError(t, err)
	cc := &countingClient{Client: mgr.GetClient()}
	r := &Reconciler{
		Deps:    bootstrap.Deps{Client: cc, PlaceholderNamespace: phNS},
		Options: controller.Options{SkipNameValidation: ptr.To(true)},
	}
	require.NoError(t, r.SetupWithManager(mgr))

	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done)
	})
	syncCtx, syncCancel := context.WithTimeout(mctx, fixture.MetalLBTimeout)
	defer syncCancel()
	require.True(t, mgr.GetCache().WaitForCacheSync(syncCtx), "the second manager's cache syncs")
	return cc
}

// familyKey identifies one family of one claim.
type familyKey struct {
	uid    types.UID
	family iadv1alpha1.IPFamily
}

// TestConcurrentReconcilesNeverAllocateTwice runs two claim controllers
// against the same claims at once: 20 IPv4 and 5 Dual claims, created
// together. Each family ends with exactly one placeholder and one
// IPAddress, every IPAddress of the class belongs to one of the claims, and
// MetalLB assigned exactly as many addresses from the class pool as there
// are IPAddresses.
func TestConcurrentReconcilesNeverAllocateTwice(t *testing.T) {
	second := startSecondManager(t)
	ns := namespace(t)
	v4, v6 := netip.MustParsePrefix("10.10.32.0/27"), netip.MustParsePrefix("fd00:aa:32::/124")
	cl := class(t, names.Provisioner, "", v4.String(), v6.String())

	const nIPv4, nDual = 20, 5
	claims := make([]*iadv1alpha1.IPAddressClaim, 0, nIPv4+nDual)
	for i := range nIPv4 + nDual {
		f := iadv1alpha1.FamilyIPv4
		if i >= nIPv4 {
			f = iadv1alpha1.FamilyDual
		}
		claims = append(claims, &iadv1alpha1.IPAddressClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("claim-%02d", i),
				Annotations: map[string]string{iadv1alpha1.ProvisionerAnnotation: names.Provisioner}},
			Spec: iadv1alpha1.IPAddressClaimSpec{ClassName: cl, Family: f},
		})
	}
	// All at once, as a burst of tenants would.
	var wg sync.WaitGroup
	errs := make([]error, len(claims))
	for i, c := range claims {
		wg.Go(func() { errs[i] = k.Create(ctx, c) })
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))

	want := map[familyKey]*iadv1alpha1.IPAddressClaim{}
	for _, c := range claims {
		for _, f := range c.Spec.Family.Families() {
			want[familyKey{c.UID, f}] = c
		}
	}
	require.Len(t, want, nIPv4+2*nDual)

	// Every family recorded: its placeholder is a hold placeholder labelled
	// with an IPAddress that exists.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		var phs corev1.ServiceList
		require.NoError(ct, k.List(ctx, &phs, client.InNamespace(phNS)))
		var addrs iadv1alpha1.IPAddressList
		require.NoError(ct, k.List(ctx, &addrs))
		exists := map[string]bool{}
		for _, a := range addrs.Items {
			exists[a.Name] = true
		}
		recordedFamilies := 0
		for key, c := range want {
			for _, ph := range phs.Items {
				if ph.Name == placeholder.AllocationName(c.UID, string(key.family)) &&
					ph.Labels[marks.LabelPlaceholder] == names.PlaceholderHold && exists[ph.Labels[marks.LabelAddress]] {
					recordedFamilies++
				}
			}
		}
		require.Equal(ct, len(want), recordedFamilies, "families recorded")
	}, 2*fixture.MetalLBTimeout, fixture.Tick, "every family of every claim is recorded")

	// One snapshot from the API server, checked as a whole.
	var phs corev1.ServiceList
	require.NoError(t, k.List(ctx, &phs, client.InNamespace(phNS)))
	var addrs iadv1alpha1.IPAddressList
	require.NoError(t, k.List(ctx, &addrs))
	var all corev1.ServiceList
	require.NoError(t, k.List(ctx, &all))

	// Exactly one placeholder per (claim, family), each holding the address
	// its IPAddress records.
	placeholders := map[familyKey][]corev1.Service{}
	for _, ph := range phs.Items {
		if ph.Annotations[marks.AnnotationClaimNamespace] != ns {
			continue
		}
		key := familyKey{types.UID(ph.Labels[marks.LabelClaimUID]), iadv1alpha1.IPFamily(ph.Annotations[marks.AnnotationFamily])}
		assert.Contains(t, want, key, "placeholder %s serves a family nobody asked for", ph.Name)
		placeholders[key] = append(placeholders[key], ph)
	}
	for key, c := range want {
		assert.Len(t, placeholders[key], 1, "placeholders of %s %s", c.Name, key.family)
	}

	// Exactly one IPAddress per (claim, family), and none of the class
	// without a claim.
	byIP := map[string]iadv1alpha1.IPAddress{}
	perFamily := map[familyKey]int{}
	for _, a := range addrs.Items {
		if a.Spec.ClassName != cl {
			continue
		}
		byIP[a.Spec.Address] = a
		ref := a.Spec.ClaimRef
		if !assert.NotNil(t, ref, "IPAddress %s has no claim", a.Name) {
			continue
		}
		key := familyKey{types.UID(ref.UID), names.AddressFamily(a.Spec.Address)}
		c, ok := want[key]
		if !assert.True(t, ok, "IPAddress %s is bound to %s/%s (uid %s, %s), which asked for no such address",
			a.Name, ref.Namespace, ref.Name, ref.UID, key.family) {
			continue
		}
		assert.Equal(t, iadv1alpha1.ClaimReference{Namespace: c.Namespace, Name: c.Name, UID: string(c.UID)}, *ref)
		perFamily[key]++
	}
	for key, c := range want {
		assert.Equal(t, 1, perFamily[key], "IPAddresses of %s %s", c.Name, key.family)
	}
	assert.Len(t, byIP, len(want))

	// MetalLB's books: every address it assigned from the class pool, to
	// any Service, is one the ledger records, and held by that address's
	// placeholder.
	assigned := map[string][]string{}
	for _, svc := range all.Items {
		for _, in := range svc.Status.LoadBalancer.Ingress {
			ip, err := netip.ParseAddr(in.IP)
			if err == nil && (v4.Contains(ip) || v6.Contains(ip)) {
				assigned[ip.String()] = append(assigned[ip.String()], svc.Namespace+"/"+svc.Name)
			}
		}
	}
	assert.Len(t, assigned, len(byIP), "MetalLB assigned as many addresses from the pool as there are IPAddresses")
	for ip, holders := range assigned {
		a, ok := byIP[ip]
		if !assert.True(t, ok, "MetalLB assigned %s to %v, but no IPAddress records it", ip, holders) {
			continue
		}
		ph := placeholder.AllocationName(types.UID(a.Spec.ClaimRef.UID), string(names.AddressFamily(ip)))
		assert.Equal(t, []string{phNS + "/" + ph}, holders, "the holders of %s", ip)
	}

	// Each family was recorded once, whichever controller won (counted
	// right after the hand-over the wait saw).
	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.Equal(ct, float64(nIPv4+nDual), testutil.ToFloat64(draw.AllocationsTotal.WithLabelValues(cl, "IPv4", draw.ResultRecorded)))
		assert.Equal(ct, float64(nDual), testutil.ToFloat64(draw.AllocationsTotal.WithLabelValues(cl, "IPv6", draw.ResultRecorded)))
	}, fixture.Timeout, fixture.Tick, "each family's recording counted once")
	assert.Positive(t, second.writes.Load(), "the second controller took part")
	t.Logf("the second controller attempted %d writes", second.writes.Load())
}

// TestReclaimPolicyIsCopied: the class's reclaim policy, Retain or Delete,
// is copied onto the addresses recorded for its claims.
func TestReclaimPolicyIsCopied(t *testing.T) {
	ns := namespace(t)
	for i, policy := range []iadv1alpha1.ReclaimPolicy{iadv1alpha1.ReclaimRetain, iadv1alpha1.ReclaimDelete} {
		t.Run(string(policy), func(t *testing.T) {
			cl := class(t, names.Provisioner, policy, fmt.Sprintf("10.10.%d.0/30", 33+i))
			got := &iadv1alpha1.IPAddressClass{}
			require.NoError(t, k.Get(ctx, types.NamespacedName{Name: cl}, got))
			require.Equal(t, policy, got.Spec.ReclaimPolicy)

			c := claim(t, ns, cl, iadv1alpha1.FamilyIPv4, names.Provisioner)
			ph, a := recorded(t, c, iadv1alpha1.FamilyIPv4)
			assertRecorded(t, c, cl, policy, iadv1alpha1.FamilyIPv4, ph, a)
			assert.Equal(t, policy, a.Spec.ReclaimPolicy)
		})
	}
}
