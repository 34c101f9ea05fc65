//go:build integration

package core_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/test/cluster"
	"github.com/cozystack/metallb-iad/test/core"
)

const (
	timeout = time.Minute
	tick    = 100 * time.Millisecond
)

var (
	k8s client.Client
	clu *cluster.Cluster
)

func TestMain(m *testing.M) { cluster.Main(m, run) }

func run(m *testing.M) (int, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Logs reach the output only when a test fails (or with -v).
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))

	var err error
	clu, err = cluster.Start(ctx, cluster.Options{NoMetalLB: true})
	if err != nil {
		return 0, fmt.Errorf("start the control plane: %w", err)
	}
	defer clu.Stop()
	k8s = clu.Client

	mgr, err := core.NewManager(clu.Config)
	if err != nil {
		return 0, fmt.Errorf("create the manager: %w", err)
	}
	return cluster.RunWithManager(ctx, mgr, m.Run), nil
}

// --- fixtures ---

func namespace(t *testing.T, name string) string {
	t.Helper()
	require.NoError(t, clu.EnsureNamespace(context.Background(), name))
	return name
}

func newClass(t *testing.T, name, provisioner string, isDefault bool, policy iadv1alpha1.ReclaimPolicy) *iadv1alpha1.IPAddressClass {
	t.Helper()
	c := &iadv1alpha1.IPAddressClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       iadv1alpha1.IPAddressClassSpec{Provisioner: provisioner, ReclaimPolicy: policy},
	}
	if isDefault {
		c.Annotations = map[string]string{iadv1alpha1.DefaultClassAnnotation: "true"}
	}
	require.NoError(t, k8s.Create(context.Background(), c))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), c) })
	return c
}

func newAddress(t *testing.T, name, ip, class string, policy iadv1alpha1.ReclaimPolicy, ref *iadv1alpha1.ClaimReference) *iadv1alpha1.IPAddress {
	t.Helper()
	a := &iadv1alpha1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: iadv1alpha1.IPAddressSpec{
			Address: ip, ClassName: class, ReclaimPolicy: policy, ClaimRef: ref,
			Source: iadv1alpha1.IPAddressSource{FromClass: &iadv1alpha1.FromClassSource{}},
		},
	}
	require.NoError(t, k8s.Create(context.Background(), a))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), a) })
	return a
}

func newClaim(t *testing.T, ns, name string, spec iadv1alpha1.IPAddressClaimSpec) *iadv1alpha1.IPAddressClaim {
	t.Helper()
	c := &iadv1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	require.NoError(t, k8s.Create(context.Background(), c))
	// Cleanups run last-in first-out: claims go before the addresses created
	// earlier, so those are no longer held when they are deleted.
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), c) })
	return c
}

func getAddress(t require.TestingT, name string) *iadv1alpha1.IPAddress {
	a := &iadv1alpha1.IPAddress{}
	require.NoError(t, k8s.Get(context.Background(), types.NamespacedName{Name: name}, a))
	return a
}

func getClaim(t require.TestingT, ns, name string) *iadv1alpha1.IPAddressClaim {
	c := &iadv1alpha1.IPAddressClaim{}
	require.NoError(t, k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, c))
	return c
}

func waitAddressPhase(t *testing.T, name string, phase iadv1alpha1.IPAddressPhase) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, phase, getAddress(c, name).Status.Phase)
	}, timeout, tick, "address %s should reach phase %s", name, phase)
}

func waitGone(t *testing.T, obj client.Object) {
	t.Helper()
	require.Eventually(t, func() bool {
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
		return apierrors.IsNotFound(err)
	}, timeout, tick, "%s should be gone", obj.GetName())
}

func assertCondition(c require.TestingT, conds []metav1.Condition, typ string, status metav1.ConditionStatus, reason, message string) {
	cond := meta.FindStatusCondition(conds, typ)
	require.NotNil(c, cond, "condition %s", typ)
	assert.Equal(c, status, cond.Status, "condition %s status", typ)
	assert.Equal(c, reason, cond.Reason, "condition %s reason", typ)
	if message != "" {
		assert.Equal(c, message, cond.Message, "condition %s message", typ)
	}
}

func ref(ns, name, uid string) *iadv1alpha1.ClaimReference {
	return &iadv1alpha1.ClaimReference{Namespace: ns, Name: name, UID: uid}
}

// --- tests ---

func TestCoreMatchesAvailableAddress(t *testing.T) {
	ns := namespace(t, "core-match")
	newClass(t, "core-match", "test.example/match", false, "")
	newAddress(t, "core-match-b", "198.51.100.11", "core-match", "", nil)
	newAddress(t, "core-match-a", "198.51.100.12", "core-match", "", nil)
	newAddress(t, "core-match-0-other", "198.51.100.13", "core-other", "", nil)
	newAddress(t, "core-match-0-v6", "2001:db8:1::1", "core-match", "", nil)
	for _, n := range []string{"core-match-a", "core-match-b", "core-match-0-other", "core-match-0-v6"} {
		waitAddressPhase(t, n, iadv1alpha1.AddressAvailable)
		assert.Contains(t, getAddress(t, n).Finalizers, iadv1alpha1.AddressProtectionFinalizer)
	}

	claim := newClaim(t, ns, "web", iadv1alpha1.IPAddressClaimSpec{ClassName: "core-match"})

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := getClaim(c, ns, "web")
		assert.Equal(c, iadv1alpha1.ClaimBound, got.Status.Phase)
		assert.Equal(c, "core-match", got.Status.ClassName)
		assert.Equal(c, []iadv1alpha1.ClaimedAddress{{Name: "core-match-a", Address: "198.51.100.12"}}, got.Status.Addresses)
		assert.Equal(c, "test.example/match", got.Annotations[iadv1alpha1.ProvisionerAnnotation])
		assert.Contains(c, got.Finalizers, iadv1alpha1.ClaimProtectionFinalizer)
		assertCondition(c, got.Status.Conditions, iadv1alpha1.ClaimConditionBound, metav1.ConditionTrue, iadv1alpha1.ReasonBound,
			"every requested family is bound: 198.51.100.12")
		assertCondition(c, got.Status.Conditions, iadv1alpha1.ClaimConditionClassResolved, metav1.ConditionTrue, iadv1alpha1.ReasonResolved,
			`IPAddressClass "core-match", provisioner "test.example/match"`)
	}, timeout, tick)

	waitAddressPhase(t, "core-match-a", iadv1alpha1.AddressBound)
	a := getAddress(t, "core-match-a")
	assert.Equal(t, ref(ns, "web", string(claim.UID)), a.Spec.ClaimRef)
	assert.Nil(t, a.Status.AssociatedTo)
	// The others were not touched: the larger name, the other class and the
	// other family stay Available and unbound.
	for _, n := range []string{"core-match-b", "core-match-0-other", "core-match-0-v6"} {
		o := getAddress(t, n)
		assert.Equal(t, iadv1alpha1.AddressAvailable, o.Status.Phase, n)
		assert.Nil(t, o.Spec.ClaimRef, n)
	}
}

func TestCoreResolvesDefaultClassAndStampsProvisioner(t *testing.T) {
	ns := namespace(t, "core-default")

	// No default class yet.
	newClaim(t, ns, "early", iadv1alpha1.IPAddressClaimSpec{})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := getClaim(c, ns, "early")
		assert.Equal(c, iadv1alpha1.ClaimPending, got.Status.Phase)
		assert.Empty(c, got.Status.ClassName)
		assert.NotContains(c, got.Annotations, iadv1alpha1.ProvisionerAnnotation)
		assertCondition(c, got.Status.Conditions, iadv1alpha1.ClaimConditionClassResolved, metav1.ConditionFalse, iadv1alpha1.ReasonNoDefaultClass,
			"the claim names no class and no IPAddressClass is marked as the default")
		assertCondition(c, got.Status.Conditions, iadv1alpha1.ClaimConditionBound, metav1.ConditionFalse, iadv1alpha1.ReasonWaitingForProvisioning,
			"waiting for an address of family IPv4")
	}, timeout, tick)

	// A default class appears: the waiting claim resolves to it on the class
	// event and is stamped for its provisioner.
	newClass(t, "core-default-a", "test.example/default-a", true, "")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := getClaim(c, ns, "early")
		assert.Equal(c, "core-default-a", got.Status.ClassName)
		assert.Equal(c, "test.example/default-a", got.Annotations[iadv1alpha1.ProvisionerAnnotation])
		assert.Equal(c, iadv1alpha1.ClaimPending, got.Status.Phase)
		assertCondition(c, got.Status.Conditions, iadv1alpha1.ClaimConditionClassResolved, metav1.ConditionTrue, iadv1alpha1.ReasonResolved,
			`IPAddressClass "core-default-a", provisioner "test.example/default-a"`)
	}, timeout, tick)

	// A second default: new claims cannot pick; the resolved one keeps its
	// sticky class.
	newClass(t, "core-default-b", "test.example/default-b", true, "")
	newClaim(t, ns, "late", iadv1alpha1.IPAddressClaimSpec{})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := getClaim(c, ns, "late")
		assert.Empty(c, got.Status.ClassName)
		assert.NotContains(c, got.Annotations, iadv1alpha1.ProvisionerAnnotation)
		assertCondition(c, got.Status.Conditions, iadv1alpha1.ClaimConditionClassResolved, metav1.ConditionFalse, iadv1alpha1.ReasonMultipleDefaultClasses,
			"the claim names no class and several IPAddressClasses are marked as the default (core-default-a, core-default-b); name one in spec.className")
	}, timeout, tick)
	early := getClaim(t, ns, "early")
	assert.Equal(t, "core-default-a", early.Status.ClassName)
	assert.Equal(t, "test.example/default-a", early.Annotations[iadv1alpha1.ProvisionerAnnotation])

	// Un-defaulting one of them resolves the late claim to the other.
	a := &iadv1alpha1.IPAddressClass{}
	require.NoError(t, k8s.Get(context.Background(), types.NamespacedName{Name: "core-default-a"}, a))
	patch := client.MergeFrom(a.DeepCopy())
	delete(a.Annotations, iadv1alpha1.DefaultClassAnnotation)
	require.NoError(t, k8s.Patch(context.Background(), a, patch))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := getClaim(c, ns, "late")
		assert.Equal(c, "core-default-b", got.Status.ClassName)
		assert.Equal(c, "test.example/default-b", got.Annotations[iadv1alpha1.ProvisionerAnnotation])
	}, timeout, tick)
	// The early claim stays on its recorded class.
	assert.Equal(t, "core-default-a", getClaim(t, ns, "early").Status.ClassName)
}

func TestCoreReportsClassNotFoundAndFollowsRetarget(t *testing.T) {
	ns := namespace(t, "core-notfound")
	newClaim(t, ns, "web", iadv1alpha1.IPAddressClaimSpec{ClassName: "core-notfound-x"})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := getClaim(c, ns, "web")
		assert.Equal(c, iadv1alpha1.ClaimPending, got.Status.Phase)
		assert.Empty(c, got.Status.ClassName)
		assertCondition(c, got.Status.Conditions, iadv1alpha1.ClaimConditionClassResolved, metav1.ConditionFalse, iadv1alpha1.ReasonClassNotFound,
			`IPAddressClass "core-notfound-x" does not exist`)
	}, timeout, tick)

	// The class appears: resolved and stamped.
	newClass(t, "core-notfound-x", "test.example/x", false, "")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := getClaim(c, ns, "web")
		assert.Equal(c, "core-notfound-x", got.Status.ClassName)
		assert.Equal(c, "test.example/x", got.Annotations[iadv1alpha1.ProvisionerAnnotation])
		assertCondition(c, got.Status.Conditions, iadv1alpha1.ClaimConditionClassResolved, metav1.ConditionTrue, iadv1alpha1.ReasonResolved, "")
	}, timeout, tick)

	// Retargeted before binding: the stamp follows the new class.
	newClass(t, "core-notfound-y", "test.example/y", false, "")
	claim := getClaim(t, ns, "web")
	patch := client.MergeFrom(claim.DeepCopy())
	claim.Spec.ClassName = "core-notfound-y"
	require.NoError(t, k8s.Patch(context.Background(), claim, patch))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := getClaim(c, ns, "web")
		assert.Equal(c, "core-notfound-y", got.Status.ClassName)
		assert.Equal(c, "test.example/y", got.Annotations[iadv1alpha1.ProvisionerAnnotation])
		assertCondition(c, got.Status.Conditions, iadv1alpha1.ClaimConditionClassResolved, metav1.ConditionTrue, iadv1alpha1.ReasonResolved,
			`IPAddressClass "core-notfound-y", provisioner "test.example/y"`)
	}, timeout, tick)
}

func TestCoreAcceptsPreBoundAddress(t *testing.T) {
	ns := namespace(t, "core-prebound")
	newClass(t, "core-prebound", "test.example/prebound", false, "")

	// Created by a "driver" before the claim exists: it waits, uid empty.
	newAddress(t, "core-prebound-a", "198.51.100.21", "core-prebound", "", ref(ns, "web", ""))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Contains(c, getAddress(c, "core-prebound-a").Finalizers, iadv1alpha1.AddressProtectionFinalizer)
	}, timeout, tick)
	a := getAddress(t, "core-prebound-a")
	assert.Empty(t, a.Status.Phase, "a pre-bound address without uid and without claim waits")
	assert.Equal(t, ref(ns, "web", ""), a.Spec.ClaimRef)

	claim := newClaim(t, ns, "web", iadv1alpha1.IPAddressClaimSpec{ClassName: "core-prebound"})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := getClaim(c, ns, "web")
		assert.Equal(c, iadv1alpha1.ClaimBound, got.Status.Phase)
		assert.Equal(c, []iadv1alpha1.ClaimedAddress{{Name: "core-prebound-a", Address: "198.51.100.21"}}, got.Status.Addresses)
	}, timeout, tick)
	waitAddressPhase(t, "core-prebound-a", iadv1alpha1.AddressBound)
	assert.Equal(t, ref(ns, "web", string(claim.UID)), getAddress(t, "core-prebound-a").Spec.ClaimRef)

	// A second pre-bound address for a claim that already exists.
	newClaim(t, ns, "api", iadv1alpha1.IPAddressClaimSpec{ClassName: "core-prebound", Family: iadv1alpha1.FamilyIPv6})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assertCondition(c, getClaim(c, ns, "api").Status.Conditions, iadv1alpha1.ClaimConditionBound, metav1.ConditionFalse,
			iadv1alpha1.ReasonWaitingForProvisioning, "waiting for an address of family IPv6")
	}, timeout, tick)
	newAddress(t, "core-prebound-b", "2001:db8:2::5", "core-prebound", iadv1alpha1.ReclaimDelete, ref(ns, "api", ""))
	api := getClaim(t, ns, "api")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := getAddress(c, "core-prebound-b")
		assert.Equal(c, iadv1alpha1.AddressBound, got.Status.Phase)
		assert.Equal(c, ref(ns, "api", string(api.UID)), got.Spec.ClaimRef)
		assert.Equal(c, iadv1alpha1.ClaimBound, getClaim(c, ns, "api").Status.Phase)
	}, timeout, tick)
}

func TestCoreIgnoresStaleBinding(t *testing.T) {
	ns := namespace(t, "core-stale")
	newClass(t, "core-stale", "test.example/stale", false, "")
	newClaim(t, ns, "web", iadv1alpha1.IPAddressClaimSpec{ClassName: "core-stale"})
	// Bound to an earlier claim of the same name: never adopted; as its claim
	// is gone, the address's own Retain policy releases it.
	newAddress(t, "core-stale-a", "198.51.100.31", "core-stale", "", ref(ns, "web", "00000000-0000-0000-0000-000000000001"))
	waitAddressPhase(t, "core-stale-a", iadv1alpha1.AddressReleased)
	a := getAddress(t, "core-stale-a")
	assert.Equal(t, ref(ns, "web", "00000000-0000-0000-0000-000000000001"), a.Spec.ClaimRef)

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := getClaim(c, ns, "web")
		assert.Equal(c, iadv1alpha1.ClaimPending, got.Status.Phase)
		assert.Empty(c, got.Status.Addresses)
	}, timeout, tick)
	assert.Equal(t, iadv1alpha1.AddressReleased, getAddress(t, "core-stale-a").Status.Phase)
}

func TestCoreReclaimDeleteDeletesAddress(t *testing.T) {
	ns := namespace(t, "core-reclaim-delete")
	newClass(t, "core-reclaim-delete", "test.example/rd", false, iadv1alpha1.ReclaimDelete)
	// The address's own policy counts, not the class's: the class says Delete,
	// the addresses say Delete and Retain.
	newAddress(t, "core-rd-a", "198.51.100.41", "core-reclaim-delete", iadv1alpha1.ReclaimDelete, nil)
	waitAddressPhase(t, "core-rd-a", iadv1alpha1.AddressAvailable)
	claim := newClaim(t, ns, "web", iadv1alpha1.IPAddressClaimSpec{ClassName: "core-reclaim-delete"})
	waitAddressPhase(t, "core-rd-a", iadv1alpha1.AddressBound)

	// While the claim lives, deleting the address does not take it away.
	a := getAddress(t, "core-rd-a")
	require.NoError(t, k8s.Delete(context.Background(), a))
	a = getAddress(t, "core-rd-a")
	assert.NotNil(t, a.DeletionTimestamp)
	assert.Contains(t, a.Finalizers, iadv1alpha1.AddressProtectionFinalizer)

	require.NoError(t, k8s.Delete(context.Background(), claim))
	waitGone(t, &iadv1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "core-rd-a"}})
	waitGone(t, claim)
}

func TestCoreReclaimDeleteWithoutPriorDeletion(t *testing.T) {
	ns := namespace(t, "core-reclaim-delete2")
	newClass(t, "core-reclaim-delete2", "test.example/rd", false, "")
	newAddress(t, "core-rd2-a", "198.51.100.42", "core-reclaim-delete2", iadv1alpha1.ReclaimDelete, nil)
	waitAddressPhase(t, "core-rd2-a", iadv1alpha1.AddressAvailable)
	claim := newClaim(t, ns, "web", iadv1alpha1.IPAddressClaimSpec{ClassName: "core-reclaim-delete2"})
	waitAddressPhase(t, "core-rd2-a", iadv1alpha1.AddressBound)

	require.NoError(t, k8s.Delete(context.Background(), claim))
	waitGone(t, &iadv1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "core-rd2-a"}})
	waitGone(t, claim)
}

func TestCoreReclaimRetainReleasesAddress(t *testing.T) {
	ns := namespace(t, "core-reclaim-retain")
	newClass(t, "core-reclaim-retain", "test.example/rr", false, iadv1alpha1.ReclaimDelete)
	newAddress(t, "core-rr-a", "198.51.100.51", "core-reclaim-retain", iadv1alpha1.ReclaimRetain, nil)
	waitAddressPhase(t, "core-rr-a", iadv1alpha1.AddressAvailable)
	claim := newClaim(t, ns, "web", iadv1alpha1.IPAddressClaimSpec{ClassName: "core-reclaim-retain"})
	waitAddressPhase(t, "core-rr-a", iadv1alpha1.AddressBound)

	require.NoError(t, k8s.Delete(context.Background(), claim))
	waitGone(t, claim)
	waitAddressPhase(t, "core-rr-a", iadv1alpha1.AddressReleased)
	a := getAddress(t, "core-rr-a")
	assert.Equal(t, ref(ns, "web", string(claim.UID)), a.Spec.ClaimRef, "Released keeps claimRef")
	assert.Nil(t, a.DeletionTimestamp)

	// A new claim of the same name does not get the Released address back.
	newClaim(t, ns, "web", iadv1alpha1.IPAddressClaimSpec{ClassName: "core-reclaim-retain"})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := getClaim(c, ns, "web")
		assert.Equal(c, iadv1alpha1.ClaimPending, got.Status.Phase)
		assert.Empty(c, got.Status.Addresses)
	}, timeout, tick)
	assert.Equal(t, iadv1alpha1.AddressReleased, getAddress(t, "core-rr-a").Status.Phase)

	// The admin recycles it by clearing claimRef: Available, then matched to
	// the waiting claim.
	a = getAddress(t, "core-rr-a")
	patch := client.MergeFrom(a.DeepCopy())
	a.Spec.ClaimRef = nil
	require.NoError(t, k8s.Patch(context.Background(), a, patch))
	second := getClaim(t, ns, "web")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := getAddress(c, "core-rr-a")
		assert.Equal(c, iadv1alpha1.AddressBound, got.Status.Phase)
		assert.Equal(c, ref(ns, "web", string(second.UID)), got.Spec.ClaimRef)
		assert.Equal(c, iadv1alpha1.ClaimBound, getClaim(c, ns, "web").Status.Phase)
	}, timeout, tick)
}

func TestCoreReleasedAddressBecomesAvailableWhenRecycled(t *testing.T) {
	ns := namespace(t, "core-recycle")
	newClass(t, "core-recycle", "test.example/recycle", false, "")
	newAddress(t, "core-recycle-a", "198.51.100.61", "core-recycle", "", nil)
	waitAddressPhase(t, "core-recycle-a", iadv1alpha1.AddressAvailable)
	claim := newClaim(t, ns, "web", iadv1alpha1.IPAddressClaimSpec{ClassName: "core-recycle"})
	waitAddressPhase(t, "core-recycle-a", iadv1alpha1.AddressBound)
	require.NoError(t, k8s.Delete(context.Background(), claim))
	waitAddressPhase(t, "core-recycle-a", iadv1alpha1.AddressReleased)

	a := getAddress(t, "core-recycle-a")
	patch := client.MergeFrom(a.DeepCopy())
	a.Spec.ClaimRef = nil
	require.NoError(t, k8s.Patch(context.Background(), a, patch))
	waitAddressPhase(t, "core-recycle-a", iadv1alpha1.AddressAvailable)
	assert.Nil(t, getAddress(t, "core-recycle-a").Spec.ClaimRef)
}

func TestCoreBindsDualClaim(t *testing.T) {
	ns := namespace(t, "core-dual")
	newClass(t, "core-dual", "test.example/dual", false, "")
	// The claim comes first; Available addresses appearing later re-queue it.
	claim := newClaim(t, ns, "web", iadv1alpha1.IPAddressClaimSpec{ClassName: "core-dual", Family: iadv1alpha1.FamilyDual})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assertCondition(c, getClaim(c, ns, "web").Status.Conditions, iadv1alpha1.ClaimConditionBound, metav1.ConditionFalse,
			iadv1alpha1.ReasonWaitingForProvisioning, "waiting for an address of family IPv4 and IPv6")
	}, timeout, tick)

	newAddress(t, "core-dual-v4", "198.51.100.71", "core-dual", "", nil)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := getClaim(c, ns, "web")
		assert.Equal(c, iadv1alpha1.ClaimPending, got.Status.Phase)
		assert.Equal(c, []iadv1alpha1.ClaimedAddress{{Name: "core-dual-v4", Address: "198.51.100.71"}}, got.Status.Addresses)
		assertCondition(c, got.Status.Conditions, iadv1alpha1.ClaimConditionBound, metav1.ConditionFalse,
			iadv1alpha1.ReasonWaitingForProvisioning, "waiting for an address of family IPv6")
	}, timeout, tick)

	newAddress(t, "core-dual-v6", "2001:db8:3::7", "core-dual", "", nil)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := getClaim(c, ns, "web")
		assert.Equal(c, iadv1alpha1.ClaimBound, got.Status.Phase)
		assert.Equal(c, []iadv1alpha1.ClaimedAddress{
			{Name: "core-dual-v4", Address: "198.51.100.71"},
			{Name: "core-dual-v6", Address: "2001:db8:3::7"},
		}, got.Status.Addresses)
	}, timeout, tick)
	for _, n := range []string{"core-dual-v4", "core-dual-v6"} {
		waitAddressPhase(t, n, iadv1alpha1.AddressBound)
		assert.Equal(t, ref(ns, "web", string(claim.UID)), getAddress(t, n).Spec.ClaimRef)
	}

	// A further address of the class stays Available: the claim is satisfied.
	newAddress(t, "core-dual-extra", "198.51.100.72", "core-dual", "", nil)
	waitAddressPhase(t, "core-dual-extra", iadv1alpha1.AddressAvailable)
	assert.Nil(t, getAddress(t, "core-dual-extra").Spec.ClaimRef)
}

func TestCoreRemovesClaimFinalizerOnDeletion(t *testing.T) {
	ns := namespace(t, "core-finalizer")
	newClass(t, "core-finalizer", "test.example/fin", false, "")
	claim := newClaim(t, ns, "web", iadv1alpha1.IPAddressClaimSpec{ClassName: "core-finalizer"})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, []string{iadv1alpha1.ClaimProtectionFinalizer}, getClaim(c, ns, "web").Finalizers)
	}, timeout, tick)

	// A finalizer of someone else is left alone.
	// The core may write the claim at the same moment: re-read on conflict.
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got := getClaim(t, ns, "web")
		patch := client.MergeFromWithOptions(got.DeepCopy(), client.MergeFromWithOptimisticLock{})
		got.Finalizers = append(got.Finalizers, "example.com/other")
		return k8s.Patch(context.Background(), got, patch)
	}))

	require.NoError(t, k8s.Delete(context.Background(), claim))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, []string{"example.com/other"}, getClaim(c, ns, "web").Finalizers)
	}, timeout, tick)
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got := getClaim(t, ns, "web")
		patch := client.MergeFromWithOptions(got.DeepCopy(), client.MergeFromWithOptimisticLock{})
		got.Finalizers = nil
		return k8s.Patch(context.Background(), got, patch)
	}))
	waitGone(t, claim)
}

func TestCorePreBindsAddressName(t *testing.T) {
	ns := namespace(t, "core-addressname")
	newClass(t, "core-addressname", "test.example/an", false, "")
	newAddress(t, "core-an-a", "198.51.100.81", "core-addressname", "", nil)
	newAddress(t, "core-an-b", "198.51.100.82", "core-addressname", "", nil)
	waitAddressPhase(t, "core-an-a", iadv1alpha1.AddressAvailable)
	waitAddressPhase(t, "core-an-b", iadv1alpha1.AddressAvailable)

	// The named address is taken although a smaller name is Available.
	claim := newClaim(t, ns, "web", iadv1alpha1.IPAddressClaimSpec{ClassName: "core-addressname", AddressName: "core-an-b"})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := getClaim(c, ns, "web")
		assert.Equal(c, iadv1alpha1.ClaimBound, got.Status.Phase)
		assert.Equal(c, []iadv1alpha1.ClaimedAddress{{Name: "core-an-b", Address: "198.51.100.82"}}, got.Status.Addresses)
	}, timeout, tick)
	waitAddressPhase(t, "core-an-b", iadv1alpha1.AddressBound)
	assert.Equal(t, ref(ns, "web", string(claim.UID)), getAddress(t, "core-an-b").Spec.ClaimRef)
	assert.Nil(t, getAddress(t, "core-an-a").Spec.ClaimRef)

	// A second claim naming the same, now bound, address waits; the free one
	// is not given to it instead.
	newClaim(t, ns, "api", iadv1alpha1.IPAddressClaimSpec{ClassName: "core-addressname", AddressName: "core-an-b"})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := getClaim(c, ns, "api")
		assert.Equal(c, iadv1alpha1.ClaimPending, got.Status.Phase)
		assertCondition(c, got.Status.Conditions, iadv1alpha1.ClaimConditionBound, metav1.ConditionFalse,
			iadv1alpha1.ReasonWaitingForProvisioning, "waiting for an address of family IPv4")
	}, timeout, tick)
	assert.Nil(t, getAddress(t, "core-an-a").Spec.ClaimRef)
	assert.Equal(t, iadv1alpha1.AddressAvailable, getAddress(t, "core-an-a").Status.Phase)
}

func TestCoreClaimLostWhenAddressLost(t *testing.T) {
	ns := namespace(t, "core-lost")
	newClass(t, "core-lost", "test.example/lost", false, "")
	newAddress(t, "core-lost-a", "198.51.100.91", "core-lost", "", nil)
	waitAddressPhase(t, "core-lost-a", iadv1alpha1.AddressAvailable)
	newClaim(t, ns, "web", iadv1alpha1.IPAddressClaimSpec{ClassName: "core-lost"})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, iadv1alpha1.ClaimBound, getClaim(c, ns, "web").Status.Phase)
	}, timeout, tick)
	waitAddressPhase(t, "core-lost-a", iadv1alpha1.AddressBound)

	// The driver marks it Lost: the claim follows, the core leaves the phase.
	setPhase(t, "core-lost-a", iadv1alpha1.AddressLost)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := getClaim(c, ns, "web")
		assert.Equal(c, iadv1alpha1.ClaimLost, got.Status.Phase)
		assert.Equal(c, []iadv1alpha1.ClaimedAddress{{Name: "core-lost-a", Address: "198.51.100.91"}}, got.Status.Addresses)
		assertCondition(c, got.Status.Conditions, iadv1alpha1.ClaimConditionBound, metav1.ConditionFalse, iadv1alpha1.ReasonAddressLost,
			"the backend lost bound address core-lost-a (198.51.100.91)")
	}, timeout, tick)
	assert.Equal(t, iadv1alpha1.AddressLost, getAddress(t, "core-lost-a").Status.Phase)

	// The driver clears it: Bound again.
	setPhase(t, "core-lost-a", iadv1alpha1.AddressBound)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := getClaim(c, ns, "web")
		assert.Equal(c, iadv1alpha1.ClaimBound, got.Status.Phase)
		assertCondition(c, got.Status.Conditions, iadv1alpha1.ClaimConditionBound, metav1.ConditionTrue, iadv1alpha1.ReasonBound, "")
	}, timeout, tick)
}

// setPhase writes an address phase as a driver would.
func setPhase(t *testing.T, name string, phase iadv1alpha1.IPAddressPhase) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		a := getAddress(c, name)
		patch := client.MergeFromWithOptions(a.DeepCopy(), client.MergeFromWithOptimisticLock{})
		a.Status.Phase = phase
		assert.NoError(c, k8s.Status().Patch(context.Background(), a, patch))
	}, timeout, tick)
}
