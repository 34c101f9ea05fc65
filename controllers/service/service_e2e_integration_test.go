package service

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim"
	"github.com/cozystack/metallb-iad/controllers/ipaddress"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/test/cluster"
	"github.com/cozystack/metallb-iad/test/core"
)

// startManager runs one more manager for the rest of the test, as the
// given identity, with the cache options of the controller it runs.
func startManager(t testing.TB, controller string, cfg *rest.Config, byObject map[client.Object]cache.ByObject, setup func(ctrl.Manager) error) {
	t.Helper()
	mgr, err := bootstrap.NewManager(cfg, &bootstrap.Options{
		Controller: controller, LeaderElect: false, MetricsBindAddress: "0", HealthProbeBindAddress: "0",
		PlaceholderNamespace: placeholderNS, MetalLBNamespace: cluster.MetalLBNamespace,
	}, byObject)
	require.NoError(t, err)
	require.NoError(t, setup(mgr))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done, "%s manager", controller)
	})
}

// startDriver runs, for the rest of the test, the reference core, the claim
// controller and the IPAddress controller (the latter two as their own
// ServiceAccounts), beside the suite's service controller; heldPartner
// stays out of the way.
func startDriver(t testing.TB) {
	t.Helper()
	pausePartner(t)
	startManager(t, "core", c.Config, nil, func(mgr ctrl.Manager) error { return core.Setup(context.Background(), mgr) })
	startManager(t, "claim", c.ServiceAccountConfig(cluster.DriverNamespace, "metallb-iad-claim"),
		claim.CacheOptions(placeholderNS), func(mgr ctrl.Manager) error {
			return (&claim.Reconciler{Client: mgr.GetClient(), PlaceholderNamespace: placeholderNS,
				Options: controller.Options{SkipNameValidation: ptr.To(true)}}).SetupWithManager(mgr)
		})
	startManager(t, "ipaddress", c.ServiceAccountConfig(cluster.DriverNamespace, "metallb-iad-ipaddress"),
		ipaddress.CacheOptions(placeholderNS), func(mgr ctrl.Manager) error {
			return (&ipaddress.Reconciler{Client: mgr.GetClient(), PlaceholderNamespace: placeholderNS,
				Options: controller.Options{SkipNameValidation: ptr.To(true)}}).SetupWithManager(mgr)
		})
}

// TestEndToEndWithCoreClaimAndIPAddressControllers runs the whole story
// with the reference core, the claim controller and the IPAddress
// controller (the class controller's pool is created by hand): a claim is
// provisioned and held by a placeholder; annotating a Service that cannot
// share the address with the placeholder (the gap handoff) moves the
// address to it; removing the annotation brings the hold back; another
// Service then gets the same address; deleting it brings the hold back.
func TestEndToEndWithCoreClaimAndIPAddressControllers(t *testing.T) {
	ctx := context.Background()
	startDriver(t)

	require.NoError(t, c.Client.Create(ctx, &iadv1alpha1.IPAddressClass{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e"},
		Spec:       iadv1alpha1.IPAddressClassSpec{Provisioner: names.Provisioner, ReclaimPolicy: iadv1alpha1.ReclaimDelete},
	}))
	require.NoError(t, c.Client.Create(ctx, &metallbv1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.MetalLBNamespace, Name: names.PoolName("e2e")},
		Spec:       metallbv1beta1.IPAddressPoolSpec{Addresses: []string{"198.51.100.240/30"}, AutoAssign: ptr.To(false)},
	}))
	cl := createClaim(t, "e2e", "web-ip", "e2e", iadv1alpha1.FamilyIPv4)

	// Provisioned, bound and held.
	var addr *iadv1alpha1.IPAddress
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		got := &iadv1alpha1.IPAddressClaim{}
		require.NoError(t, c.Client.Get(ctx, client.ObjectKeyFromObject(cl), got))
		require.Equal(t, iadv1alpha1.ClaimBound, got.Status.Phase)
		require.Len(t, got.Status.Addresses, 1)
		addr = getAddr(t, got.Status.Addresses[0].Name)
		assert.Equal(t, iadv1alpha1.AddressBound, addr.Status.Phase)
		assert.True(t, conditions.IsTrue(addr.Status.Conditions, conditions.Held), "held by a placeholder")
	}, timeout, tick)
	require.NotNil(t, addr)
	ip := addr.Spec.Address
	assertHeld(t, addr.Name, ip)

	// Attach.
	create(t, lb("e2e", "web", "web-ip"))
	assertAssociated(t, "e2e", "web", "web-ip", ip, addr)
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		a := getAddr(t, addr.Name)
		cond := meta.FindStatusCondition(a.Status.Conditions, conditions.Held)
		if assert.NotNil(t, cond) {
			assert.Equal(t, metav1.ConditionFalse, cond.Status)
			assert.Equal(t, conditions.ReasonReleasedForWorkload, cond.Reason)
		}
		assert.Empty(t, placeholdersOf(t, addr.Name), "no placeholder while attached")
		assert.Equal(t, iadv1alpha1.AddressBound, a.Status.Phase)
	}, timeout, tick)

	// Detach by removing the annotation: the hold comes back on the same IP.
	patchAnnotations(t, "e2e", "web", map[string]string{iadv1alpha1.ServiceClaimAnnotation: ""})
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		s := getSvc(t, "e2e", "web")
		assert.Empty(t, ingress(s))
		assert.NotContains(t, s.Annotations, names.MetalLBLoadBalancerIPs)
		a := getAddr(t, addr.Name)
		assert.Nil(t, a.Status.AssociatedTo)
		assert.Equal(t, iadv1alpha1.AddressBound, a.Status.Phase)
	}, timeout, tick)
	assertHeld(t, addr.Name, ip)

	// Another Service gets the same address.
	create(t, lb("e2e", "api", "web-ip"))
	assertAssociated(t, "e2e", "api", "web-ip", ip, addr)

	// Deleting it brings the hold back.
	require.NoError(t, c.Client.Delete(ctx, getSvc(t, "e2e", "api")))
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		err := c.Client.Get(ctx, client.ObjectKey{Namespace: "e2e", Name: "api"}, &corev1.Service{})
		assert.True(t, apierrors.IsNotFound(err))
	}, timeout, tick)
	assertHeld(t, addr.Name, ip)
	assert.Equal(t, iadv1alpha1.AddressBound, getAddr(t, addr.Name).Status.Phase)
}

// placeholdersOf lists the placeholders labelled with the address.
func placeholdersOf(t require.TestingT, address string) []corev1.Service {
	var list corev1.ServiceList
	require.NoError(t, c.Client.List(context.Background(), &list, client.InNamespace(placeholderNS),
		client.MatchingLabels{names.LabelAddress: address}))
	return list.Items
}

// assertHeld waits until the address is unattached, reports Held True, and
// a placeholder in the placeholder namespace holds exactly its IP.
func assertHeld(t *testing.T, address, ip string) {
	t.Helper()
	assert.EventuallyWithT(t, func(t *assert.CollectT) {
		a := getAddr(t, address)
		assert.Nil(t, a.Status.AssociatedTo)
		assert.True(t, conditions.IsTrue(a.Status.Conditions, conditions.Held), "Held")
		held := false
		for _, ph := range placeholdersOf(t, address) {
			held = held || (len(ingress(&ph)) == 1 && ingress(&ph)[0] == ip)
		}
		assert.True(t, held, "a placeholder holds %s", ip)
	}, timeout, tick)
}
