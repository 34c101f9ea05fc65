package ipaddress

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/test/cluster"
)

// TestStaleAllocationCleared: MetalLB v0.15.2 ignores Service events until
// its first full pass over the Services succeeds, so a Service deleted in
// that window keeps its address in MetalLB's books, invisible in the API.
// The test holds that window open (an admission policy refuses MetalLB's
// status write of one Service, so the first pass keeps failing), deletes
// the attached Service inside it, then lets MetalLB finish starting. The
// re-armed hold placeholder is refused ("address also in use by" the
// deleted Service) and would stay without the address until MetalLB
// restarts; the controller clears the stale allocation and the hold gets
// the address back.
func TestStaleAllocationCleared(t *testing.T) {
	ctx := context.Background()
	const ip, blockerIP = "192.0.2.146", "192.0.2.150"
	ourClass(t, "ghost", "192.0.2.144/29")
	a := newAddress(t, "ghost", ip, nil)
	requireHeldBy(t, a.Name, ip)

	// Attach a Service that cannot share with the hold (it uses the
	// placeholder's port and no key): the hold goes, the Service holds.
	namespace(t, "ghost-tenant")
	web := loadBalancer("ghost-tenant", "web", map[string]string{names.MetalLBLoadBalancerIPs: ip})
	web.Spec.Ports = []corev1.ServicePort{{Name: "disc", Port: 9, TargetPort: intstr.FromInt32(9), Protocol: corev1.ProtocolTCP}}
	require.NoError(t, adm.Create(ctx, web))
	patchStatus(t, a.Name, func(st *iadv1alpha1.IPAddressStatus) {
		st.AssociatedTo = &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "ghost-tenant", Name: "web"}
	})
	requireIngress(t, web, ip)
	require.EventuallyWithT(t, func(ct *assert.CollectT) { assert.Empty(ct, placeholders(ct, a.Name)) }, timeout, tick)

	// Keep MetalLB's first pass failing after a restart: its status write
	// of the blocker is refused.
	c.StopMetalLB()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "ghost-blocker"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
						Resources: []string{"services/status"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "object.metadata.name != 'blocker'"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "ghost-blocker"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "ghost-blocker",
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	require.NoError(t, adm.Create(ctx, policy))
	require.NoError(t, adm.Create(ctx, binding))
	t.Cleanup(func() {
		_ = adm.Delete(context.Background(), binding)
		_ = adm.Delete(context.Background(), policy)
	})
	blocker := loadBalancer("ghost-tenant", "blocker", map[string]string{names.MetalLBLoadBalancerIPs: blockerIP})
	require.NoError(t, adm.Create(ctx, blocker))
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		got := &corev1.Service{}
		require.NoError(ct, adm.Get(ctx, client.ObjectKeyFromObject(blocker), got))
		got.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: blockerIP}}
		err := adm.Status().Update(ctx, got)
		assert.True(ct, apierrors.IsInvalid(err) || apierrors.IsForbidden(err), "the policy refuses the blocker's status: %v", err)
	}, timeout, tick)

	require.NoError(t, c.StartMetalLB(ctx))
	// MetalLB's first pass has run once its pool counts both addresses:
	// web's, and the blocker's, which it cannot write.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		pool := &metallbv1beta1.IPAddressPool{}
		require.NoError(ct, adm.Get(ctx, client.ObjectKey{Namespace: cluster.MetalLBNamespace, Name: names.PoolName("ghost")}, pool))
		assert.Equal(ct, int64(2), pool.Status.AssignedIPv4)
	}, timeout, tick, "MetalLB booked web's and the blocker's addresses")
	require.NoError(t, adm.Delete(ctx, web))
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		err := adm.Get(ctx, client.ObjectKeyFromObject(web), &corev1.Service{})
		assert.True(ct, apierrors.IsNotFound(err))
	}, timeout, tick)
	// The driver re-arms the hold; MetalLB, still starting, refuses it the
	// address it books for the deleted web.
	requireEvent(t, testPlaceholderNamespace, names.HoldPlaceholderName(a.Name), "AllocationFailed")
	require.NoError(t, adm.Delete(ctx, binding))
	require.NoError(t, adm.Delete(ctx, policy))

	// MetalLB finishes starting at its next retry, which its backoff may
	// put tens of seconds away.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		phs := placeholders(ct, a.Name)
		require.Len(ct, phs, 1)
		assert.Equal(ct, []string{ip}, ingressIPs(&phs[0]))
	}, 2*time.Minute, tick, "the re-armed hold gets the address MetalLB booked for the deleted Service")
	requireHeldBy(t, a.Name, ip)
	assert.Contains(t, requireEvent(t, "default", a.Name, ReasonStaleAllocationCleared), "ghost-tenant/web")
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		err := adm.Get(ctx, client.ObjectKeyFromObject(web), &corev1.Service{})
		assert.True(ct, apierrors.IsNotFound(err), "the Service that cleared the allocation is gone again")
	}, timeout, tick)
	require.NoError(t, adm.Delete(ctx, blocker))
}
