package service

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
)

// boundTo are the addresses of items bound to the claim's uid and not
// being deleted.
func boundTo(claim *iadv1alpha1.IPAddressClaim, items []iadv1alpha1.IPAddress) []*iadv1alpha1.IPAddress {
	var out []*iadv1alpha1.IPAddress
	for i := range items {
		a := &items[i]
		if a.Spec.ClaimRef.UID == string(claim.UID) && a.DeletionTimestamp == nil {
			out = append(out, a)
		}
	}
	return out
}

// OnePerFamily keeps, of a claim's addresses, one per IP family: a claim
// holds two of a family when a Lost address recovered after the core bound
// its replacement, and MetalLB refuses a pin with two of one family. It
// prefers the address not Lost, then the one associated with the Service,
// then the one it holds, then the first by name. Unparsable ones are kept.
func OnePerFamily(addrs []*iadv1alpha1.IPAddress, svc *corev1.Service) []*iadv1alpha1.IPAddress {
	rank := func(a *iadv1alpha1.IPAddress) int {
		r := 0
		if a.Status.Phase != iadv1alpha1.AddressLost {
			r += 4
		}
		if AssociatedWith(a, svc.Namespace, svc.Name) {
			r += 2
		}
		if marks.Holds(svc, a.Spec.Address) {
			r++
		}
		return r
	}
	best := map[bool]*iadv1alpha1.IPAddress{}
	var out []*iadv1alpha1.IPAddress
	for _, a := range addrs {
		ip, err := names.ParseAddress(a.Spec.Address)
		if err != nil {
			out = append(out, a)
			continue
		}
		cur, ok := best[ip.Is4()]
		if !ok || rank(a) > rank(cur) || (rank(a) == rank(cur) && a.Name < cur.Name) {
			best[ip.Is4()] = a
		}
	}
	for _, a := range best {
		out = append(out, a)
	}
	sortByName(out)
	return out
}

// associatedHolder names the workload at, which an address of the claim
// is associated with; other is that Service (nil for another kind). It is
// on its way out when it is being deleted or no longer names the claim.
func associatedHolder(at *iadv1alpha1.WorkloadReference, other *corev1.Service, namespace, claim string) (holder string, detaching bool) {
	if at.Kind != "Service" {
		return fmt.Sprintf("%s %s/%s", at.Kind, at.Namespace, at.Name), false
	}
	return at.Namespace + "/" + at.Name, other.DeletionTimestamp != nil ||
		other.Namespace != namespace || marks.Of(other).Claim != claim
}

// grantedTo is the other Service an attach grant on a (not associated
// with svc) names; a grant can only name a Service of the claim's
// namespace.
func grantedTo(a *iadv1alpha1.IPAddress, svc *corev1.Service) (types.NamespacedName, bool) {
	other, ok := marks.AttachingService(a)
	if !ok || other == client.ObjectKeyFromObject(svc) || AssociatedWith(a, svc.Namespace, svc.Name) || other.Namespace != svc.Namespace {
		return types.NamespacedName{}, false
	}
	return other, true
}

// grantHeld reports whether the Service a grant names still holds it: it
// asks for the claim, or is on its way out (detaching) while it still
// carries the driver's pin for it. Otherwise the grant is free to take over.
func grantHeld(other *corev1.Service, claim string) (held, detaching bool) {
	m := marks.Of(other)
	asks := other.DeletionTimestamp == nil && m.Claim == claim
	pinned := m.PinnedBy == claim
	return asks || pinned, !asks
}

// pinnedIPs are the IPs the Service's pin names or its ingress shows.
func pinnedIPs(svc *corev1.Service) map[string]bool {
	want := map[string]bool{}
	for _, ip := range marks.Of(svc).PinIPs() {
		want[ip] = true
	}
	for _, ip := range marks.IngressIPs(svc) {
		want[ip] = true
	}
	return want
}

// addressIPs returns the canonical IPs of addresses.
func addressIPs(addrs []*iadv1alpha1.IPAddress) []string {
	var out []string
	for _, a := range addrs {
		if ip, err := names.ParseAddress(a.Spec.Address); err == nil {
			out = append(out, ip.String())
		}
	}
	return out
}

// canonicalIPs names each address's canonical IP, by address name; an
// address whose IP does not parse is left out.
func canonicalIPs(addrs []*iadv1alpha1.IPAddress) map[string]string {
	out := make(map[string]string, len(addrs))
	for _, a := range addrs {
		if ip, err := names.ParseAddress(a.Spec.Address); err == nil {
			out[a.Name] = ip.String()
		}
	}
	return out
}

func addressPointers(items []iadv1alpha1.IPAddress) []*iadv1alpha1.IPAddress {
	var out []*iadv1alpha1.IPAddress
	for i := range items {
		out = append(out, &items[i])
	}
	return out
}

func containsAddress(list []*iadv1alpha1.IPAddress, a *iadv1alpha1.IPAddress) bool {
	return slices.ContainsFunc(list, func(b *iadv1alpha1.IPAddress) bool { return b.UID == a.UID })
}

func sortByName(addrs []*iadv1alpha1.IPAddress) {
	slices.SortFunc(addrs, func(a, b *iadv1alpha1.IPAddress) int { return strings.Compare(a.Name, b.Name) })
}
