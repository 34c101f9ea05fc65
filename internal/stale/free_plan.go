package stale

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
)

// freeHolders returns the Services MetalLB's Events say it assigned a
// free address of family f in ranges (one the ledger does not record).
func freeHolders(evs []corev1.Event, f iadv1alpha1.IPFamily, ranges []classparams.AddressRange, ledger map[string]bool) map[types.NamespacedName]Assignment {
	return Assignments(evs, func(ip string) bool {
		return names.AddressFamily(ip) == f && !ledger[ip] && classparams.InRanges(ranges, ip)
	})
}

// refusalWait is how long a refusal at refusedSince, or the last poke,
// is still given before anything is cleared.
func refusalWait(refused []*corev1.Service, refusedSince, now time.Time) time.Duration {
	wait := Wait - now.Sub(refusedSince)
	for _, ph := range refused {
		if poked, ok := marks.RetriedAt(ph); ok {
			wait = max(wait, Wait-now.Sub(poked))
		}
	}
	return wait
}

// clearedSince returns the placeholders last refused (at refusedSince) or
// poked before lastClear.
func clearedSince(refused []*corev1.Service, refusedSince, lastClear time.Time) []*corev1.Service {
	var out []*corev1.Service
	for _, ph := range refused {
		asked := refusedSince
		if poked, ok := marks.RetriedAt(ph); ok && poked.After(asked) {
			asked = poked
		}
		if lastClear.After(asked) {
			out = append(out, ph)
		}
	}
	return out
}
