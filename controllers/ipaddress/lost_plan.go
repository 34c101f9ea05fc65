package ipaddress

import (
	"net/netip"
	"strings"
	"time"

	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/stale"
)

// lostCause is the Lost condition's reason and message when MetalLB's
// configuration does not contain ip: its class's pool is missing or does
// not cover it. A class that is gone is no cause by itself: the class
// controller keeps its pool for the addresses recorded under its name.
func lostCause(className string, class *iadv1alpha1.IPAddressClass, pool *metallbv1beta1.IPAddressPool, metallbNamespace string, ip netip.Addr) (reason, message string) {
	poolName := names.PoolName(className)
	switch {
	case (pool == nil || pool.DeletionTimestamp != nil) && (class == nil || class.DeletionTimestamp != nil):
		return conditions.ReasonClassDeleted, msgLostClassDeleted(className, metallbNamespace, poolName, ip)
	case pool == nil || pool.DeletionTimestamp != nil:
		return conditions.ReasonPoolMissing, msgLostPoolMissing(metallbNamespace, poolName, ip)
	case !poolContains(pool.Spec.Addresses, ip):
		return conditions.ReasonOutsidePool, msgLostOutsidePool(metallbNamespace, poolName, pool.Spec.Addresses, ip)
	}
	return "", ""
}

// poolContains reports whether one of a pool's entries (CIDRs or ranges
// "first-last") contains ip; entries that do not parse contain nothing.
func poolContains(entries []string, ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if first, last, ok := strings.Cut(e, "-"); ok {
			lo, err1 := netip.ParseAddr(strings.TrimSpace(first))
			hi, err2 := netip.ParseAddr(strings.TrimSpace(last))
			if err1 == nil && err2 == nil && lo.Unmap().Compare(ip) <= 0 && ip.Compare(hi.Unmap()) <= 0 &&
				lo.Unmap().Is4() == ip.Is4() {
				return true
			}
			continue
		}
		if p, err := netip.ParsePrefix(e); err == nil && p.Masked().Contains(ip) {
			return true
		}
	}
	return false
}

// saidSince reports whether one of evs is about the object with uid, has
// the reason and was last said after since: an Event about an earlier
// time the address went Lost does not say this one. Events and conditions
// keep whole seconds, so one said in since's second does not count: the
// owners may hear it twice, never not at all.
func saidSince(evs []corev1.Event, uid types.UID, reason string, since time.Time) bool {
	for i := range evs {
		if evs[i].InvolvedObject.UID == uid && evs[i].Reason == reason && stale.EventTime(&evs[i]).After(since) {
			return true
		}
	}
	return false
}
