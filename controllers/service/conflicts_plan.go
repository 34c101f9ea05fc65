package service

import (
	corev1 "k8s.io/api/core/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
)

// grab is one unauthorized holding: an IP of a class held by a Service.
type grab struct {
	Class string
	IP    string
	// Address is the IPAddress recording the IP, "" when none does.
	Address string
}

// classRanges is a served class's name and parsed ranges.
type classRanges struct {
	name   string
	ranges []classparams.AddressRange
}

// classOfIP is the class among classes whose ranges contain ip; "" when none.
func classOfIP(classes []classRanges, ip string) string {
	addr, err := names.ParseAddress(ip)
	if err != nil {
		return ""
	}
	for _, c := range classes {
		for _, rg := range c.ranges {
			if rg.Start.Is4() == addr.Is4() && rg.Start.Compare(addr) <= 0 && addr.Compare(rg.End) <= 0 {
				return c.name
			}
		}
	}
	return ""
}

// conflicting reports whether svc holding a served address is a conflict.
// An address being deleted is leaving the ledger (its teardown takes it
// back); a Lost one is outside its class's pool, so its holder got the IP
// from another pool, and the IPAddress controller reports that.
func conflicting(svc *corev1.Service, a *iadv1alpha1.IPAddress) bool {
	return a.DeletionTimestamp == nil && !marks.Authorizes(a, svc) && a.Status.Phase != iadv1alpha1.AddressLost
}
