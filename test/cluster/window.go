package cluster

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// StartingWindow restarts MetalLB and keeps it in its start-up window, in
// which MetalLB v0.15.2 ignores every single-Service event: an admission
// policy refuses MetalLB's status write of blocker (a LoadBalancer Service
// pinned to an address MetalLB can give it, created here), so MetalLB's
// first full pass keeps failing. It returns once that pass has run (the
// pool named pool counts booked IPv4 addresses) and a function that ends
// the window: it lifts the policy and then changes MetalLB's configuration
// (a pool that serves nothing comes and, at cleanup, goes), which makes
// MetalLB run its full pass again at once rather than at its next retry,
// which its backoff may put minutes away.
func (c *Cluster) StartingWindow(t *testing.T, blocker *corev1.Service, pool string, booked int64) (end func()) {
	t.Helper()
	const timeout, tick = 2 * time.Minute, 100 * time.Millisecond
	ctx := context.Background()
	c.StopMetalLB()
	name := "starting-window-" + blocker.Namespace + "-" + blocker.Name
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
						Resources: []string{"services/status"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "object.metadata.namespace != '" + blocker.Namespace + "' || object.metadata.name != '" + blocker.Name + "'"}},
		},
	}
	bind := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	require.NoError(t, c.Client.Create(ctx, policy))
	require.NoError(t, c.Client.Create(ctx, bind))
	nudge := &metallbv1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: MetalLBNamespace, Name: name},
		Spec:       metallbv1beta1.IPAddressPoolSpec{Addresses: []string{"198.51.100.255/32"}, AutoAssign: new(bool)},
	}
	var once sync.Once
	end = func() {
		once.Do(func() {
			_ = c.Client.Delete(context.Background(), bind)
			_ = c.Client.Delete(context.Background(), policy)
			c.waitAdmitted(blocker, time.Minute)
			_ = c.Client.Create(context.Background(), nudge)
		})
	}
	t.Cleanup(func() {
		end()
		_ = c.Client.Delete(context.Background(), nudge)
	})
	require.NoError(t, c.Client.Create(ctx, blocker))
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), blocker) })
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		got := &corev1.Service{}
		require.NoError(ct, c.Client.Get(ctx, client.ObjectKeyFromObject(blocker), got))
		got.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}}
		err := c.Client.Status().Update(ctx, got)
		assert.True(ct, apierrors.IsInvalid(err) || apierrors.IsForbidden(err), "the policy refuses the blocker's status: %v", err)
	}, timeout, tick)
	require.NoError(t, c.StartMetalLB(ctx))
	// MetalLB's first pass has run once its pool counts the addresses it
	// booked, the blocker's included (which it cannot write).
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		p := &metallbv1beta1.IPAddressPool{}
		require.NoError(ct, c.Client.Get(ctx, client.ObjectKey{Namespace: MetalLBNamespace, Name: pool}, p))
		assert.Equal(ct, booked, p.Status.AssignedIPv4)
	}, timeout, tick, "MetalLB's first pass booked %d addresses of pool %s", booked, pool)
	return end
}

// waitAdmitted waits, at most within, until the API server admits a status
// write of blocker again: its admission stops applying a deleted policy a
// moment after the deletion, later on a busy machine. The write changes
// nothing (admission judges it all the same, before the API server drops it
// as a no-op), so nobody sees it. A blocker already gone needs no wait.
func (c *Cluster) waitAdmitted(blocker *corev1.Service, within time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		got := &corev1.Service{}
		err := c.Client.Get(ctx, client.ObjectKeyFromObject(blocker), got)
		if err == nil {
			err = c.Client.Status().Update(ctx, got)
		}
		if err == nil || apierrors.IsNotFound(err) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}
