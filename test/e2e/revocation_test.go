package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/test/cluster"
)

// TestClassEditInUseIsRefused: an edit of a class whose new range leaves out
// an address attached to a Service is refused, with a Warning naming the
// address and its claim; the pool keeps its range and the Service its IP.
func TestClassEditInUseIsRefused(t *testing.T) {
	story(t, "class-edit-refused", "a class edit that would drop an address in use is refused", "edit", func(ctx context.Context, t *testing.T, cfg *envconf.Config, k *kit) {
		k.class("e2e-edit", iadv1alpha1.ReclaimRetain, "198.51.100.64/30")
		a := k.attachedClaim("ip", "e2e-edit", "web")

		k.setClassAddresses("e2e-edit", "198.51.100.68/30")
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			msgs := strings.Join(k.events(c, "IPAddressClass", "e2e-edit", "AddressesInUse"), "\n")
			assert.Contains(c, msgs, a.Name, "the Warning names the address")
			assert.Contains(c, msgs, "claim edit/ip", "the Warning names the claim")
			assert.Contains(c, msgs, "Service edit/web", "the Warning names the Service")
		}, wait, tick, "the class gets a Warning AddressesInUse")
		assert.Equal(t, []string{"198.51.100.64/30"}, k.poolAddresses("e2e-edit"), "the previous rendering stays")
		k.attached("web", a)
		assert.Equal(t, iadv1alpha1.AddressBound, k.address(a.Name).Status.Phase)

		// A change that keeps the address in the range is rendered.
		k.setClassAddresses("e2e-edit", "198.51.100.64/30", "198.51.100.68/30")
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.Equal(c, []string{"198.51.100.64/30", "198.51.100.68/30"}, k.poolAddresses("e2e-edit"))
		}, wait, tick, "a change keeping the address is rendered")
		k.attached("web", a)
	})
}

// TestRevokedAddressIsLostAndComesBack: when MetalLB's configuration loses
// addresses behind the driver's back (the pool edited, then deleted, by hand
// while the class controller is down), the held address and the attached
// one go Lost with Warnings on the address, the claim and the Service; when
// the class controller repairs the pool they come back Bound, held and
// attached, with the same IPs.
func TestRevokedAddressIsLostAndComesBack(t *testing.T) {
	story(t, "revoked-lost", "a hand-edited and a hand-deleted pool make addresses Lost until the range returns", "lost", func(ctx context.Context, t *testing.T, cfg *envconf.Config, k *kit) {
		k.class("e2e-lost", iadv1alpha1.ReclaimRetain, "198.51.100.72/30")
		held := k.heldClaim("held", "e2e-lost")
		used := k.attachedClaim("used", "e2e-lost", "web")

		restart, err := k.fleet.stopAll(ctx, "class")
		require.NoError(t, err)
		restarted := false
		t.Cleanup(func() {
			if !restarted {
				_ = restart()
			}
		})

		// Edited by hand: the range no longer contains the addresses.
		pool := &metallbv1beta1.IPAddressPool{}
		require.NoError(t, k.k.Get(ctx, client.ObjectKey{Namespace: cluster.MetalLBNamespace, Name: names.PoolName("e2e-lost")}, pool))
		patch := client.MergeFrom(pool.DeepCopy())
		pool.Spec.Addresses = []string{"198.51.100.120/30"}
		require.NoError(t, k.k.Patch(ctx, pool, patch))
		k.lost(held, "held", "")
		k.lost(used, "used", "web")
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.Empty(c, k.ingressOf("web"), "MetalLB took the address from the Service")
		}, wait, tick)

		// Deleted by hand: still Lost, for another reason.
		require.NoError(t, k.k.Delete(ctx, pool))
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			a := k.address(held.Name)
			assert.Equal(c, iadv1alpha1.AddressLost, a.Status.Phase)
			assert.Contains(c, conditionReason(a, "Lost"), "PoolMissing")
		}, wait, tick, "the address is Lost because the pool is missing")

		// The class controller comes back and re-renders the pool: both
		// addresses recover with the same IPs.
		restarted = true
		require.NoError(t, restart())
		k.held(held, iadv1alpha1.AddressBound)
		k.attached("web", used)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.NotEmpty(c, k.events(c, "IPAddress", held.Name, "AddressRecovered"))
			assert.NotEmpty(c, k.events(c, "IPAddressClaim", "used", "AddressRecovered"))
			assert.NotEmpty(c, k.events(c, "Service", "web", "AddressRecovered"))
		}, wait, tick, "the recovery is told on the address, the claim and the Service")
	})
}

// TestDeletedClassKeepsItsAddresses: deleting a class revokes nothing (the
// core's promise). An attached Service keeps its IP, a held address stays
// held, both claims stay Bound, and every address says why its class's
// pool is still there; after every controller restarts it is all the same.
// A new claim of the class gets nothing; a reclaim still works; the class
// created again takes the pool over with its whole range.
func TestDeletedClassKeepsItsAddresses(t *testing.T) {
	story(t, "class-deleted", "deleting a class leaves every binding and attachment intact", "gone", func(ctx context.Context, t *testing.T, cfg *envconf.Config, k *kit) {
		k.class("e2e-gone", iadv1alpha1.ReclaimRetain, "198.51.100.80/29")
		web := k.attachedClaim("web-ip", "e2e-gone", "web")
		held := k.heldClaim("ip", "e2e-gone")
		spare := k.heldClaim("spare", "e2e-gone")

		require.NoError(t, k.k.Delete(ctx, &iadv1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "e2e-gone"}}))
		kept := func(msg string) {
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				assert.ElementsMatch(c, []string{web.Address + "/32", held.Address + "/32", spare.Address + "/32"}, k.poolAddresses("e2e-gone"))
				for _, a := range []iadv1alpha1.ClaimedAddress{web, held, spare} {
					addr := k.address(a.Name)
					assert.Equal(c, iadv1alpha1.AddressBound, addr.Status.Phase, a.Name)
					assert.True(c, conditions.IsTrue(addr.Status.Conditions, conditions.ClassGone), "%s says its class is gone", a.Name)
					assert.False(c, conditions.IsTrue(addr.Status.Conditions, conditions.Lost), a.Name)
				}
				for _, claim := range []string{"web-ip", "ip", "spare"} {
					cl := &iadv1alpha1.IPAddressClaim{}
					require.NoError(c, k.k.Get(ctx, client.ObjectKey{Namespace: k.ns, Name: claim}, cl))
					assert.Equal(c, iadv1alpha1.ClaimBound, cl.Status.Phase, claim)
				}
			}, wait, tick, msg)
			k.attached("web", web)
			k.held(held, iadv1alpha1.AddressBound)
		}
		kept("the class's addresses stay bound, attached and held")
		assert.NotEmpty(t, k.events(t, "IPAddress", held.Name, conditions.ReasonKeptUntilReleased))

		for _, c := range cluster.Controllers {
			require.NoError(t, k.fleet.restart(ctx, c))
		}
		kept("after every controller restarted, nothing changed")

		// Nothing new is given out of the deleted class.
		k.claim("late", "e2e-gone", iadv1alpha1.FamilyIPv4)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			cl := &iadv1alpha1.IPAddressClaim{}
			require.NoError(c, k.k.Get(ctx, client.ObjectKey{Namespace: k.ns, Name: "late"}, cl))
			assert.Equal(c, iadv1alpha1.ClaimPending, cl.Status.Phase)
			cond := meta.FindStatusCondition(cl.Status.Conditions, iadv1alpha1.ClaimConditionClassResolved)
			require.NotNil(c, cond)
			assert.Equal(c, iadv1alpha1.ReasonClassNotFound, cond.Reason)
		}, wait, tick, "a new claim of the deleted class waits with ClassNotFound")

		// A reclaim works: the address is Released, and the pool still
		// holds it (the address is still recorded under the class).
		k.deleteClaim("spare")
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.Equal(c, iadv1alpha1.AddressReleased, k.address(spare.Name).Status.Phase)
		}, wait, tick, "the spare address is Released")

		// The class comes back: its pool serves the whole range again.
		k.class("e2e-gone", iadv1alpha1.ReclaimRetain, "198.51.100.80/29")
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			addr := k.address(held.Name)
			assert.True(c, meta.IsStatusConditionFalse(addr.Status.Conditions, conditions.ClassGone))
		}, wait, tick, "the address says its class is back")
		k.attached("web", web)
		k.held(held, iadv1alpha1.AddressBound)
		k.bound("late")
	})
}

// TestPendingClaimDuringGap: a one-address class; claim A attached to a
// Service that takes the gap handoff (externalTrafficPolicy Local); claim B
// waits with PoolExhausted. Detaching A leaves the IP unheld for a moment,
// and MetalLB hands it to B's placeholder: the driver gives it back instead
// of fighting over it. A ends held again with its IP, B stays Pending with
// PoolExhausted, and nothing is rewritten afterwards.
func TestPendingClaimDuringGap(t *testing.T) {
	story(t, "pending-claim-gap", "a pending claim never takes a ledger address during a gap", "gap", func(ctx context.Context, t *testing.T, cfg *envconf.Config, k *kit) {
		k.class("e2e-gap", iadv1alpha1.ReclaimRetain, "198.51.100.90/32")
		a := k.heldClaim("a", "e2e-gap")
		k.localService("web", "a")
		k.attached("web", a)

		k.claim("b", "e2e-gap", iadv1alpha1.FamilyIPv4)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.NotEmpty(c, k.events(c, "IPAddressClaim", "b", "PoolExhausted"))
		}, wait, tick, "claim b waits with PoolExhausted")

		k.unannotate("web")
		k.held(a, iadv1alpha1.AddressBound)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			b := &iadv1alpha1.IPAddressClaim{}
			require.NoError(c, k.k.Get(ctx, client.ObjectKey{Namespace: k.ns, Name: "b"}, b))
			assert.Equal(c, iadv1alpha1.ClaimPending, b.Status.Phase)
			addr := k.address(a.Name)
			assert.Equal(c, "gap", addr.Spec.ClaimRef.Namespace)
			assert.Equal(c, "a", addr.Spec.ClaimRef.Name)
			assert.Equal(c, []string{a.Address}, k.placeholderIngress(a.Name), "A's own placeholder holds its IP")
		}, wait, tick, "A is held again and B stays Pending")
		t.Logf("claim b: %v", k.events(t, "IPAddressClaim", "b", "LedgerAddressReturned"))
		k.quiet(cfg, "e2e-gap", 4*time.Second)
	})
}

// TestLostWarningAfterALeaderStopped: an IPAddress controller that wrote
// phase Lost and stopped before its Warning Events were sent leaves an
// address Lost with nothing said; the next leader records the AddressLost
// Warnings on the address and its claim, and the address recovers as usual.
func TestLostWarningAfterALeaderStopped(t *testing.T) {
	story(t, "lost-unannounced", "a Lost phase written without its Warnings is announced by the next leader", "lostquiet", func(ctx context.Context, t *testing.T, cfg *envconf.Config, k *kit) {
		const class = "e2e-lost-quiet"
		k.class(class, iadv1alpha1.ReclaimRetain, "198.51.100.104/30")
		held := k.heldClaim("held", class)

		startClass, err := k.fleet.stopAll(ctx, "class")
		require.NoError(t, err)
		startIPAddress, err := k.fleet.stopAll(ctx, "ipaddress")
		require.NoError(t, err)
		classBack, ipaddressBack := false, false
		t.Cleanup(func() {
			if !ipaddressBack {
				_ = startIPAddress()
			}
			if !classBack {
				_ = startClass()
			}
		})

		// The pool goes, and the address is written Lost as the stopped
		// leader would have written it, with no Event.
		pool := &metallbv1beta1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: cluster.MetalLBNamespace, Name: names.PoolName(class)}}
		require.NoError(t, k.k.Delete(ctx, pool))
		a := k.address(held.Name)
		before := a.DeepCopy()
		a.Status.Phase = iadv1alpha1.AddressLost
		meta.SetStatusCondition(&a.Status.Conditions, metav1.Condition{Type: conditions.Lost, Status: metav1.ConditionTrue,
			Reason: conditions.ReasonPoolMissing, Message: "written by hand for the test", ObservedGeneration: a.Generation})
		require.NoError(t, k.k.Status().Patch(ctx, a, client.MergeFrom(before)))
		assert.Empty(t, k.events(t, "IPAddress", held.Name, "AddressLost"))

		ipaddressBack = true
		require.NoError(t, startIPAddress())
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.NotEmpty(c, k.events(c, "IPAddress", held.Name, "AddressLost"), "on the address")
			assert.NotEmpty(c, k.events(c, "IPAddressClaim", "held", "AddressLost"), "on the claim")
		}, wait, tick, "the next leader records the AddressLost Warnings")
		assert.Equal(t, iadv1alpha1.AddressLost, k.address(held.Name).Status.Phase)

		classBack = true
		require.NoError(t, startClass())
		k.held(held, iadv1alpha1.AddressBound)
	})
}

// setClassAddresses replaces a class's parameters with these addresses.
func (k *kit) setClassAddresses(name string, addresses ...string) {
	k.setClassParameters(name, fmt.Sprintf(`{"addresses":["%s"]}`, strings.Join(addresses, `","`)))
}

// setClassParameters replaces a class's parameters.
func (k *kit) setClassParameters(name, params string) {
	require.EventuallyWithT(k.t, func(t *assert.CollectT) {
		c := &iadv1alpha1.IPAddressClass{}
		require.NoError(t, k.k.Get(k.ctx, client.ObjectKey{Name: name}, c))
		c.Spec.Parameters = &apiextensionsv1.JSON{Raw: []byte(params)}
		require.NoError(t, k.k.Update(k.ctx, c))
	}, wait, tick)
}

// TestClassShrinkOverWarmAddresses: an edit that leaves warm addresses
// (reserved by the driver, bound to no claim) outside a class's ranges is
// not refused for them: the driver drops them with an Event, the new ranges
// are rendered, the warm addresses are refilled inside them, and an
// address bound to a claim that the new ranges keep stays held.
func TestClassShrinkOverWarmAddresses(t *testing.T) {
	story(t, "class-shrink-warm", "warm addresses outside edited ranges are dropped and refilled inside", "shrinkwarm", func(ctx context.Context, t *testing.T, cfg *envconf.Config, k *kit) {
		const class = "e2e-shrink-warm"
		require.NoError(t, k.k.Create(ctx, cluster.Class(class, iadv1alpha1.ReclaimDelete,
			`{"addresses":["198.51.100.96/30"],"warmAddresses":2}`)))
		t.Cleanup(func() {
			// Warm addresses are nobody's: they go with the class.
			bg := context.Background()
			_ = k.k.Delete(bg, &iadv1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: class}})
			l := &iadv1alpha1.IPAddressList{}
			_ = k.k.List(bg, l)
			for i := range l.Items {
				if l.Items[i].Spec.ClassName == class {
					_ = k.k.Delete(bg, &l.Items[i])
				}
			}
		})
		warm := func(c require.TestingT) []iadv1alpha1.IPAddress {
			l := &iadv1alpha1.IPAddressList{}
			require.NoError(c, k.k.List(ctx, l))
			var out []iadv1alpha1.IPAddress
			for _, a := range l.Items {
				if a.Spec.ClassName == class && a.Spec.ClaimRef == nil && a.DeletionTimestamp == nil &&
					a.Status.Phase == iadv1alpha1.AddressAvailable {
					out = append(out, a)
				}
			}
			return out
		}
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			require.Len(c, warm(c), 2)
		}, wait, tick, "the class gets its two warm addresses")

		// A claim takes one; the driver refills.
		kept := k.heldClaim("kept", class)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			require.Len(c, warm(c), 2)
		}, wait, tick, "the warm addresses are refilled")
		old := map[string]bool{}
		for _, a := range warm(t) {
			old[a.Name] = true
		}

		// The new ranges keep the bound address and nothing else of the
		// old range.
		next := []string{kept.Address + "/32", "198.51.100.100/30"}
		k.setClassParameters(class, fmt.Sprintf(`{"addresses":["%s"],"warmAddresses":2}`, strings.Join(next, `","`)))
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.Equal(c, next, k.poolAddresses(class))
		}, wait, tick, "the new ranges are rendered once the warm addresses outside them are dropped")
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			ws := warm(c)
			require.Len(c, ws, 2)
			for _, a := range ws {
				assert.False(c, old[a.Name], "warm address %s outside the new ranges is still there", a.Name)
				assert.True(c, strings.HasPrefix(a.Spec.Address, "198.51.100.10"), "warm address %s is inside the new ranges", a.Spec.Address)
			}
		}, wait, tick, "the warm addresses are refilled inside the new ranges")
		assert.NotEmpty(t, k.events(t, "IPAddressClass", class, "WarmAddressDropped"))
		k.held(kept, iadv1alpha1.AddressBound)
	})
}

func (k *kit) poolAddresses(class string) []string {
	p := &metallbv1beta1.IPAddressPool{}
	require.NoError(k.t, k.k.Get(k.ctx, client.ObjectKey{Namespace: cluster.MetalLBNamespace, Name: names.PoolName(class)}, p))
	return p.Spec.Addresses
}

// lost waits until the address is Lost with Warning AddressLost Events on
// it, on its claim and, when svc is set, on the Service.
func (k *kit) lost(a iadv1alpha1.ClaimedAddress, claim, svc string) {
	require.EventuallyWithT(k.t, func(t *assert.CollectT) {
		assert.Equal(t, iadv1alpha1.AddressLost, k.address(a.Name).Status.Phase)
		assert.NotEmpty(t, k.events(t, "IPAddress", a.Name, "AddressLost"), "on the address")
		assert.NotEmpty(t, k.events(t, "IPAddressClaim", claim, "AddressLost"), "on the claim")
		if svc != "" {
			assert.NotEmpty(t, k.events(t, "Service", svc, "AddressLost"), "on the Service")
		}
	}, wait, tick, "%s (%s) goes Lost, told on the address, the claim and the Service", a.Name, a.Address)
}

func conditionReason(a *iadv1alpha1.IPAddress, typ string) string {
	for _, c := range a.Status.Conditions {
		if c.Type == typ {
			return c.Reason + ": " + c.Message
		}
	}
	return ""
}

// localService creates a LoadBalancer Service with externalTrafficPolicy
// Local (it cannot share an IP with a placeholder: the gap handoff)
// annotated with a claim.
func (k *kit) localService(name, claim string) {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: k.ns, Name: name, Annotations: map[string]string{iadv1alpha1.ServiceClaimAnnotation: claim}},
		Spec: corev1.ServiceSpec{
			Type:                  corev1.ServiceTypeLoadBalancer,
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
			Selector:              map[string]string{"app": name},
			Ports:                 []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
		},
	}
	require.NoError(k.t, k.k.Create(k.ctx, s))
}

// placeholderIngress is what MetalLB assigned to the placeholders labelled
// with the address.
func (k *kit) placeholderIngress(address string) []string {
	list := &corev1.ServiceList{}
	require.NoError(k.t, k.k.List(k.ctx, list, client.InNamespace(k.fleet.placeholderNamespace()),
		client.MatchingLabels{marks.LabelAddress: address}))
	var out []string
	for i := range list.Items {
		out = append(out, ingress(&list.Items[i])...)
	}
	return out
}

// quiet watches, for d, the IPAddresses and placeholders of a class and the
// claims and Services of the kit's namespace, and fails on any change: once
// the story has converged, no controller rewrites anything.
func (k *kit) quiet(cfg *envconf.Config, class string, d time.Duration) {
	k.t.Helper()
	wc, err := client.NewWithWatch(cfg.Client().RESTConfig(), client.Options{Scheme: bootstrap.Scheme()})
	require.NoError(k.t, err)
	type target struct {
		list client.ObjectList
		opts []client.ListOption
	}
	targets := []target{
		{&iadv1alpha1.IPAddressList{}, nil},
		{&iadv1alpha1.IPAddressClaimList{}, []client.ListOption{client.InNamespace(k.ns)}},
		{&corev1.ServiceList{}, []client.ListOption{client.InNamespace(k.ns)}},
		{&corev1.ServiceList{}, []client.ListOption{client.InNamespace(k.fleet.placeholderNamespace())}},
	}
	ctx, cancel := context.WithTimeout(k.ctx, d)
	defer cancel()
	var mu sync.Mutex
	var seen []string
	var wg sync.WaitGroup
	for _, tg := range targets {
		require.NoError(k.t, wc.List(ctx, tg.list, tg.opts...))
		rv := tg.list.(metav1.ListInterface).GetResourceVersion()
		w, err := wc.Watch(ctx, tg.list, append(tg.opts, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})...)
		require.NoError(k.t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer w.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case ev, ok := <-w.ResultChan():
					if !ok {
						return
					}
					if o, ok := ev.Object.(client.Object); ok && ev.Type != watch.Bookmark && ev.Type != watch.Error && ofClass(o, k.ns, class) {
						mu.Lock()
						seen = append(seen, fmt.Sprintf("%s %T %s/%s rv %s", ev.Type, o, o.GetNamespace(), o.GetName(), o.GetResourceVersion()))
						mu.Unlock()
					}
				}
			}
		}()
	}
	<-ctx.Done()
	wg.Wait()
	assert.Empty(k.t, seen, "nothing is rewritten once the story has converged")
}

// ofClass reports whether a watched object belongs to the story of a class:
// its IPAddresses, the placeholders drawing from its pool, and anything in
// the story's namespace.
func ofClass(o client.Object, ns, class string) bool {
	switch v := o.(type) {
	case *iadv1alpha1.IPAddress:
		return v.Spec.ClassName == class
	case *corev1.Service:
		return v.Namespace == ns || v.Annotations[marks.KeyClass] == class
	}
	return true
}
