// Package parking decides whether a hold placeholder can step aside for an
// attached workload without costing MetalLB a full pass over every Service,
// and finds the parking pool (marks.Park and marks.Hold write the marks
// that park it and bring it back).
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
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/metallb-iad/internal/classparams"
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
