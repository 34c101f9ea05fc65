package e2e

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/parking"
	"github.com/cozystack/metallb-iad/test/cluster"
)

// flagshipSteps is the story a tenant lives through, as a list of steps so
// the restart feature can crash a controller between any two of them, and
// the address the claim gets once the second step ran.
func flagshipSteps(k *kit, class string, policy iadv1alpha1.ReclaimPolicy) ([]func(), *iadv1alpha1.ClaimedAddress) {
	a := &iadv1alpha1.ClaimedAddress{}
	return []func(){
		func() { k.claim("ip", class, iadv1alpha1.FamilyIPv4) },
		func() {
			got := k.bound("ip")
			require.Len(k.t, got, 1)
			*a = got[0]
			k.held(*a, iadv1alpha1.AddressBound)
		},
		func() {
			k.service("a", "ip")
			k.attached("a", *a)
			// The hold steps aside to the parking pool (installed with the
			// driver) instead of going, and waits there for the detach.
			require.EventuallyWithT(k.t, func(t *assert.CollectT) {
				assert.Contains(t, strings.Join(k.events(t, "Service", "a", "Associated"), "\n"), "parked handoff")
				list := &corev1.ServiceList{}
				require.NoError(t, k.k.List(k.ctx, list, client.InNamespace(k.fleet.placeholderNamespace()), client.MatchingLabels{marks.LabelAddress: a.Name}))
				if assert.Len(t, list.Items, 1, "the hold is kept") {
					ph := &list.Items[0]
					assert.Equal(t, parking.DefaultPool, ph.Annotations[marks.KeyPool], "parked")
					for _, in := range ph.Status.LoadBalancer.Ingress {
						assert.NotEqual(t, a.Address, in.IP, "the parked hold does not hold the address")
					}
				}
			}, wait, tick, "the attach took the parked handoff")
		},
		func() { k.deleteService("a"); k.held(*a, iadv1alpha1.AddressBound) },
		func() { k.service("b", "ip"); k.attached("b", *a) },
		func() { k.unannotate("b"); k.held(*a, iadv1alpha1.AddressBound) },
		func() {
			k.deleteClaim("ip")
			if policy == iadv1alpha1.ReclaimRetain {
				k.held(*a, iadv1alpha1.AddressReleased) // still reserved in MetalLB's books
				return
			}
			require.Eventually(k.t, func() bool {
				return apierrors.IsNotFound(k.k.Get(k.ctx, client.ObjectKey{Name: a.Name}, &iadv1alpha1.IPAddress{}))
			}, wait, tick, "the IPAddress is deleted under Delete")
			k.pinnedService("free", class, a.Address) // the IP is free again: MetalLB gives it to anyone asking
			require.EventuallyWithT(k.t, func(t *assert.CollectT) {
				assert.Equal(t, []string{a.Address}, k.ingressOf("free"))
			}, wait, tick, "a plain Service gets the freed IP")
		},
	}, a
}

func flagship(name, class, cidr string, policy iadv1alpha1.ReclaimPolicy) features.Feature {
	return features.New(name).
		Assess("claim, attach, detach, re-attach, give up: "+string(policy), func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			k := newKit(ctx, t, cfg, name)
			k.class(class, policy, cidr)
			steps, a := flagshipSteps(k, class, policy)
			for _, s := range steps {
				s()
			}
			// Every step is healthy: no Warning about the tenant's
			// objects, the address or the class, but the one the last step
			// provokes under Delete: a Service pinned by hand to the freed
			// IP holds an address of the class without a claim.
			expected := map[string]string{}
			if policy == iadv1alpha1.ReclaimDelete {
				expected = map[string]string{"Service/free": "UnclaimedAddress", "IPAddressClass/" + class: "UnclaimedAddress"}
			}
			k.noWarnings(expected, "IPAddress/"+a.Name, "IPAddressClass/"+class)
			return ctx
		}).Feature()
}

func TestFlagship(t *testing.T) {
	testenv.Test(t,
		flagship("flagship-retain", "e2e-retain", "198.51.100.0/28", iadv1alpha1.ReclaimRetain),
		flagship("flagship-delete", "e2e-delete", "198.51.100.16/28", iadv1alpha1.ReclaimDelete),
	)
}

// TestTheft: a Service pinned by hand at a reserved address does not get it
// while the address is held; when it gets it anyway (the hold lost while
// the IPAddress controller is down), the address goes Conflict with Events
// naming both sides, and it recovers once the rogue Service is gone.
func TestTheft(t *testing.T) {
	story(t, "theft", "a rogue pinned Service is refused, then detected, then recovered from", "theft", func(ctx context.Context, t *testing.T, cfg *envconf.Config, k *kit) {
		k.class("e2e-theft", iadv1alpha1.ReclaimRetain, "198.51.100.32/28")
		a := k.heldClaim("ip", "e2e-theft")

		rogue := newKit(ctx, t, cfg, "theft-rogue")
		rogue.pinnedService("rogue", "e2e-theft", a.Address)
		time.Sleep(2 * time.Second)
		assert.Empty(t, rogue.ingressOf("rogue"), "a held address is not handed to a rogue Service")

		// Take the hold away behind the driver's back while the
		// IPAddress controller cannot re-arm it, and nudge MetalLB.
		restart, err := k.fleet.stopAll(ctx, "ipaddress")
		require.NoError(t, err)
		list := &corev1.ServiceList{}
		require.NoError(t, k.k.List(ctx, list, client.InNamespace(k.fleet.placeholderNamespace()), client.MatchingLabels{marks.LabelAddress: a.Name}))
		for i := range list.Items {
			require.NoError(t, k.k.Delete(ctx, &list.Items[i]))
		}
		nudge(ctx, t, rogue, "rogue")
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.Equal(c, []string{a.Address}, rogue.ingressOf("rogue"))
		}, wait, tick, "MetalLB hands the unheld IP to the rogue Service")

		require.EventuallyWithT(t, func(c *assert.CollectT) {
			addr := k.address(a.Name)
			assert.Equal(c, iadv1alpha1.AddressConflict, addr.Status.Phase)
			svcEvents := strings.Join(k.events(c, "Service", "rogue", "AddressConflict"), "\n")
			addrEvents := strings.Join(k.events(c, "IPAddress", a.Name, "AddressConflict"), "\n")
			assert.Contains(c, svcEvents, a.Name, "the Service's Event names the address")
			assert.Contains(c, addrEvents, "theft-rogue/rogue", "the address's Event names the Service")
		}, wait, tick, "the address goes Conflict with Events on both sides")

		require.NoError(t, restart())
		rogue.deleteService("rogue")
		k.held(a, iadv1alpha1.AddressBound) // Conflict recovered, hold re-armed, same IP
	})
}

// TestDualStack attaches and detaches a Dual claim.
func TestDualStack(t *testing.T) {
	story(t, "dual-stack", "a Dual claim attaches both families, v4 first, and detaches", "dual", func(ctx context.Context, t *testing.T, cfg *envconf.Config, k *kit) {
		k.class("e2e-dual", iadv1alpha1.ReclaimDelete, "198.51.100.48/28", "2001:db8:e2e::/124")
		k.claim("ip", "e2e-dual", iadv1alpha1.FamilyDual)
		addrs := k.bound("ip")
		require.Len(t, addrs, 2)
		k.held(addrs[0], iadv1alpha1.AddressBound)
		k.held(addrs[1], iadv1alpha1.AddressBound)
		k.service("web", "ip", corev1.IPv4Protocol, corev1.IPv6Protocol)
		k.attached("web", addrs...)
		k.unannotate("web")
		k.held(addrs[0], iadv1alpha1.AddressBound)
		k.held(addrs[1], iadv1alpha1.AddressBound)
	})
}

// TestRestartOneController kills each controller's leader in turn at a
// random step of the flagship story and restarts it; the others keep
// serving and the story ends as it would without the crash.
func TestRestartOneController(t *testing.T) {
	var fs []features.Feature
	for i := 0; i < repeat; i++ {
		for _, c := range cluster.Controllers {
			name := "restart-" + c + "-" + string(rune('a'+i))
			class := "e2e-" + name
			cidr := []string{"203.0.113.96/29", "203.0.113.104/29", "203.0.113.112/29", "203.0.113.120/29"}[indexOf(c)]
			fs = append(fs, features.New(name).
				Assess("crash "+c+" mid-story", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
					k := newKit(ctx, t, cfg, name)
					k.class(class, iadv1alpha1.ReclaimDelete, cidr)
					steps, _ := flagshipSteps(k, class, iadv1alpha1.ReclaimDelete)
					at := rand.IntN(len(steps))
					for j, s := range steps {
						if j == at {
							t.Logf("killing the %s leader before step %d", c, j)
							require.NoError(t, k.fleet.restart(ctx, c))
						}
						s()
					}
					// Clean up the class so later iterations can reuse the range.
					require.NoError(t, k.k.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: "free"}}))
					require.NoError(t, k.k.Delete(ctx, &iadv1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: class}}))
					return ctx
				}).Feature())
		}
	}
	testenv.Test(t, fs...)
}

// TestLeaderFailover kills the leader of each controller; a standby takes
// the lease and work continues. It logs the time each takeover took.
func TestLeaderFailover(t *testing.T) {
	story(t, "failover", "each controller's standby takes over and serves", "failover", func(ctx context.Context, t *testing.T, cfg *envconf.Config, k *kit) {
		k.class("e2e-failover", iadv1alpha1.ReclaimDelete, "203.0.113.128/27")
		for i := 0; i < repeat; i++ {
			for _, c := range cluster.Controllers {
				took, err := k.fleet.killLeader(ctx, c)
				require.NoError(t, err)
				t.Logf("failover %d: %s standby took the lease after %s", i+1, c, took.Round(time.Millisecond))
				if local != nil {
					_, err := local.StartReplica(ctx, c)
					require.NoError(t, err)
				}
				claim := "ip-" + c + "-" + string(rune('a'+i))
				k.attachedClaim(claim, "e2e-failover", "svc-"+claim)
				k.deleteService("svc-" + claim)
				k.deleteClaim(claim)
			}
		}
	})
}

// TestClassLifecycle deletes and recreates a class and serves a second
// class with its own range.
func TestClassLifecycle(t *testing.T) {
	story(t, "classes", "two classes, each its own range; delete and recreate one", "classes", func(ctx context.Context, t *testing.T, cfg *envconf.Config, k *kit) {
		k.class("e2e-gold", iadv1alpha1.ReclaimDelete, "203.0.113.0/28")
		k.class("e2e-silver", iadv1alpha1.ReclaimDelete, "203.0.113.16/28")
		k.claim("gold", "e2e-gold", iadv1alpha1.FamilyIPv4)
		k.claim("silver", "e2e-silver", iadv1alpha1.FamilyIPv4)
		gold := netip.MustParseAddr(k.bound("gold")[0].Address)
		silver := netip.MustParseAddr(k.bound("silver")[0].Address)
		assert.True(t, netip.MustParsePrefix("203.0.113.0/28").Contains(gold), "gold %s comes from its range", gold)
		assert.True(t, netip.MustParsePrefix("203.0.113.16/28").Contains(silver), "silver %s comes from its range", silver)
		k.deleteClaim("silver")

		require.NoError(t, k.k.Delete(ctx, &iadv1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "e2e-silver"}}))
		require.Eventually(t, func() bool {
			err := k.k.Get(ctx, client.ObjectKey{Namespace: cluster.MetalLBNamespace, Name: names.PoolName("e2e-silver")}, &metallbv1beta1.IPAddressPool{})
			return apierrors.IsNotFound(err)
		}, wait, tick, "deleting the class removes its pool")
		k.class("e2e-silver", iadv1alpha1.ReclaimDelete, "203.0.113.16/28")
		k.claim("silver2", "e2e-silver", iadv1alpha1.FamilyIPv4)
		assert.NotEmpty(t, k.bound("silver2")[0].Address)
	})
}

func indexOf(c string) int {
	for i, x := range cluster.Controllers {
		if x == c {
			return i
		}
	}
	return 0
}

// nudge touches a Service so MetalLB reconsiders it now.
func nudge(ctx context.Context, t *testing.T, k *kit, name string) {
	s := &corev1.Service{}
	require.NoError(t, k.k.Get(ctx, client.ObjectKey{Namespace: k.ns, Name: name}, s))
	patch := client.MergeFrom(s.DeepCopy())
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	s.Labels["e2e-nudge"] = time.Now().Format("150405.000")
	require.NoError(t, k.k.Patch(ctx, s, patch))
}
