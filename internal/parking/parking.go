// Package parking decides whether a hold placeholder can step aside for an
// attached workload without costing MetalLB a full pass over every Service,
// and writes the annotations that park it and bring it back.
//
// MetalLB reprocesses every Service when a Service it had allocated is
// deleted, or is left without an address while that address is still in a
// pool (controller/main.go). Moving a Service to another pool that has room
// costs neither: MetalLB clears the old address and allocates from the new
// pool in one look (controller/service.go, differentPoolRequested). So the
// hold of an address that is being attached moves to the parking pool, an
// IPAddressPool of addresses nobody uses, which frees the address for the
// workload; on detach the same placeholder is pinned back to it.
package parking

import (
	"context"
	"net/netip"

	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/names"
)

// DefaultPool is the name of the parking pool the chart installs.
const DefaultPool = "metallb-iad-parking"

// Serves reports whether pool, the parking pool as a cache shows it (nil
// when absent), can park a placeholder of ip's family: it exists, is not
// being deleted and has a range of that family.
func Serves(pool *metallbv1beta1.IPAddressPool, ip netip.Addr) bool {
	if pool == nil || pool.DeletionTimestamp != nil {
		return false
	}
	for _, r := range classparams.PoolRanges(pool.Spec.Addresses) {
		if r.Is4() == ip.Unmap().Is4() {
			return true
		}
	}
	return false
}

// ServesAll reports whether the pool can park a placeholder of every ip.
func ServesAll(pool *metallbv1beta1.IPAddressPool, ips []netip.Addr) bool {
	for _, ip := range ips {
		if !Serves(pool, ip) {
			return false
		}
	}
	return len(ips) > 0
}

// Parked reports whether a placeholder asks for the parking pool named pool
// and no address of its own: it has stepped aside.
func Parked(svc *corev1.Service, pool string) bool {
	return pool != "" && svc.Annotations[names.MetalLBAddressPool] == pool &&
		svc.Annotations[names.MetalLBLoadBalancerIPs] == "" && svc.Annotations[names.MetalLBLegacyLoadBalancerIPs] == ""
}

// Annotations are a placeholder's annotations parked in pool: no pin and
// no sharing key (a first allocation with a key would cost a full pass),
// the parking pool requested. The input is not modified.
func Annotations(in map[string]string, pool string) map[string]string {
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = v
	}
	for _, k := range []string{names.MetalLBLoadBalancerIPs, names.MetalLBLegacyLoadBalancerIPs,
		names.MetalLBAllowSharedIP, names.MetalLBLegacyAllowSharedIP, names.MetalLBLegacyAddressPool} {
		delete(out, k)
	}
	out[names.MetalLBAddressPool] = pool
	return out
}

// Get reads the parking pool named name in namespace from c; nil, and no
// error, when parking is off (name is empty) or the pool does not exist.
func Get(ctx context.Context, c client.Reader, namespace, name string) (*metallbv1beta1.IPAddressPool, error) {
	if name == "" {
		return nil, nil
	}
	pool := &metallbv1beta1.IPAddressPool{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, pool); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return pool, nil
}
