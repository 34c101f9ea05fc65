package ipaddress

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/placeholder"
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
		return conditions.ReasonClassDeleted, fmt.Sprintf("IPAddressClass %s was deleted and IPAddressPool %s/%s does not exist: MetalLB no longer has %s "+
			"and took it from whoever held it. The address comes back with the same IP when a class of that name serves a range containing it again",
			className, metallbNamespace, poolName, ip)
	case pool == nil || pool.DeletionTimestamp != nil:
		return conditions.ReasonPoolMissing, fmt.Sprintf("IPAddressPool %s/%s does not exist: MetalLB no longer has %s and took it from whoever held it. "+
			"The address comes back with the same IP when the pool is rendered again", metallbNamespace, poolName, ip)
	case !poolContains(pool.Spec.Addresses, ip):
		return conditions.ReasonOutsidePool, fmt.Sprintf("IPAddressPool %s/%s (%s) does not contain %s: MetalLB took it from whoever held it. "+
			"The address comes back with the same IP when the pool contains it again", metallbNamespace, poolName,
			strings.Join(pool.Spec.Addresses, ", "), ip)
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

func serviceFamily(ip netip.Addr) corev1.IPFamily {
	if ip.Is4() {
		return corev1.IPv4Protocol
	}
	return corev1.IPv6Protocol
}

// renderHold is the hold placeholder of an address: pinned to exactly ip,
// drawing from the class pool, with the sharing key when key is not empty,
// labelled with the address name and owner-referenced to it.
func renderHold(namespace string, a *iadv1alpha1.IPAddress, ip netip.Addr, key string) *corev1.Service {
	return marks.Mark(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      names.HoldPlaceholderName(a.Name),
			Labels: map[string]string{
				names.LabelPlaceholder: names.PlaceholderHold,
				names.LabelAddress:     a.Name,
			},
			Annotations:     map[string]string{names.AnnotationClass: a.Spec.ClassName},
			OwnerReferences: []metav1.OwnerReference{placeholder.OwnerRef(a)},
		},
		Spec: placeholder.Spec(serviceFamily(ip)),
	}, marks.Requests{Pool: names.PoolName(a.Spec.ClassName), Pin: ip.String(), Sharing: key, Grant: a.Spec.ClassName})
}

// grantState is the Granted condition: True when every holder the driver
// answers for (its placeholders, the Services the binding authorizes)
// carries the class's grant label, so a pool that admits only granted
// Services keeps their assignments. Holders without authority are not
// waited for (taking the address from them is the grant's point), nor a
// Service being released or let go, whose label a detach withdraws while
// MetalLB still shows it holding the address.
func grantState(a *iadv1alpha1.IPAddress, holders []corev1.Service, placeholderNamespace string) heldState {
	var missing []string
	for i := range holders {
		s := &holders[i]
		if s.DeletionTimestamp != nil || (s.Namespace != placeholderNamespace && (!marks.Authorizes(a, s) || marks.Of(s).Releasing() || marks.LetGo(a, s))) {
			continue
		}
		if !marks.Of(s).Granted(a.Spec.ClassName) {
			missing = append(missing, s.Namespace+"/"+s.Name)
		}
	}
	if len(missing) == 0 {
		return heldState{metav1.ConditionTrue, conditions.ReasonHoldersGranted,
			fmt.Sprintf("every Service holding the address for the driver carries %s", marks.GrantText(a.Spec.ClassName))}
	}
	slices.Sort(missing)
	return heldState{metav1.ConditionFalse, conditions.ReasonHolderNotGranted,
		fmt.Sprintf("Service %s holds the address without %s yet; the driver labels it", strings.Join(missing, ", "), marks.GrantText(a.Spec.ClassName))}
}

// unauthorizedHolders lists the holders without the binding's authority;
// the driver's own placeholders are exempt (marks.Exempt).
func unauthorizedHolders(a *iadv1alpha1.IPAddress, holders []corev1.Service, placeholderNamespace string) []*corev1.Service {
	var out []*corev1.Service
	for i := range holders {
		s := &holders[i]
		if marks.Exempt(s, placeholderNamespace) || marks.Authorizes(a, s) {
			continue
		}
		out = append(out, s)
	}
	return out
}

// claimBinding is what became of the claim the claimRef names.
type claimBinding int

const (
	bindingNone   claimBinding = iota // no claimRef
	bindingStands                     // the claim exists with the claimRef's uid, or the uid is not set yet
	bindingBroken                     // the claim is gone or has another uid
)

// handBackPhase is the phase a Conflict or Lost address returns to. A
// broken binding goes to Available, where the core applies the reclaim
// policy (it never binds an address with a claimRef).
func handBackPhase(b claimBinding) iadv1alpha1.IPAddressPhase {
	if b == bindingStands {
		return iadv1alpha1.AddressBound
	}
	return iadv1alpha1.AddressAvailable
}

// ownPlaceholder reports whether a placeholder labelled with the address's
// name is its own, the only kind repaired, counted and deleted: a hold
// owner-referenced to it, or an allocation placeholder of its claim. Another
// claim's is left to that claim's controller, or both would rewrite it.
func ownPlaceholder(a *iadv1alpha1.IPAddress, ph *corev1.Service) bool {
	switch ph.Labels[names.LabelPlaceholder] {
	case names.PlaceholderHold:
		return ownedBy(ph, a)
	case names.PlaceholderAllocation:
		ref := a.Spec.ClaimRef
		switch {
		case ref == nil:
			return false
		case ref.UID != "":
			return ph.Labels[names.LabelClaimUID] == ref.UID
		default:
			return ph.Annotations[names.AnnotationClaimNamespace] == ref.Namespace && ph.Annotations[names.AnnotationClaimName] == ref.Name
		}
	}
	return false
}

// ownPlaceholders keeps the address's own placeholders of a list.
func ownPlaceholders(a *iadv1alpha1.IPAddress, phs []corev1.Service) []corev1.Service {
	out := phs[:0:0]
	for i := range phs {
		if ownPlaceholder(a, &phs[i]) {
			out = append(out, phs[i])
		}
	}
	return out
}

// releaseAction is the teardown's next step on a Service (releaseStep).
type releaseAction int

const (
	releaseNone     releaseAction = iota // not the driver's pin for the address, or the Service is being deleted
	releasePin                           // write the release pin, withdraw the driver's key
	releaseWait                          // wait for MetalLB to take the address back
	releaseWithdraw                      // withdraw the release pin and the markers
	releaseDropIP                        // remove the IP from a pin the Service does not hold yet
)

// releaseStep decides the teardown's next step on a Service and what to
// write: one holding the IP gets the release pin, then loses pin and
// markers once its ingress is empty; one pinned without holding it yet
// loses the IP. Only the driver's pins (pinned-by marker) that name the IP
// or that the binding authorizes are released; a Service let go in one
// write (marks.LetGo) is only waited for.
func releaseStep(svc *corev1.Service, a *iadv1alpha1.IPAddress, ip string) (releaseAction, marks.Marks) {
	m := marks.Of(svc)
	if marks.LetGo(a, svc) && marks.Holds(svc, ip) {
		return releaseWait, m
	}
	if m.PinnedBy == "" || svc.DeletionTimestamp != nil {
		return releaseNone, m
	}
	pin := m.Pin
	pinned := slices.Contains(m.PinIPs(), ip)
	if !pinned && !marks.Authorizes(a, svc) {
		return releaseNone, m
	}
	ingress := marks.IngressIPs(svc)
	holds, anyIngress := slices.Contains(ingress, ip), len(ingress) > 0
	release := marks.ReleasePinValue(svc)
	switch {
	case holds && pin != release:
		m.Release(release)
		return releasePin, m
	case holds:
		return releaseWait, m
	case marks.IsReleasePin(pin) && anyIngress:
		return releaseWait, m // MetalLB drops every address at once; not yet
	case marks.IsReleasePin(pin):
		m.Withdraw()
		return releaseWithdraw, m
	case pinned:
		m.DropIP(ip)
		return releaseDropIP, m
	}
	return releaseNone, m
}

// ownedBy reports whether a Service carries an owner reference to the address.
func ownedBy(svc *corev1.Service, a *iadv1alpha1.IPAddress) bool {
	for _, o := range svc.OwnerReferences {
		if o.UID == a.UID {
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

// conflictSettle is how long after Conflict turned True the controller
// waits before judging that nobody holds the address wrongfully, so its
// Service cache can catch up with the holder the Service controller saw.
const conflictSettle = 2 * time.Second

// conflictSettling is how much longer a Conflict that turned True recently
// waits to be judged; 0 for no wait.
func conflictSettling(a *iadv1alpha1.IPAddress, now time.Time) time.Duration {
	c := meta.FindStatusCondition(a.Status.Conditions, conditions.Conflict)
	if c == nil || c.Status != metav1.ConditionTrue {
		return 0
	}
	if d := c.LastTransitionTime.Add(conflictSettle).Sub(now); d > 0 {
		return d
	}
	return 0
}

// firstReportWindow bounds how long the first report waits for the core.
const firstReportWindow = 10 * time.Second

// firstReportDeferral is how much longer the first status report on a new
// address (orig has no status) waits; 0 to write it now. The core writes a
// new address two or three times, and a report locked to a version before
// one of them fails; so a report of conditions waits until the core set
// the phase, or the window passed. A phase the driver sets goes at once.
func firstReportDeferral(orig, next *iadv1alpha1.IPAddress, now time.Time) time.Duration {
	if orig.Status.Phase != "" || len(orig.Status.Conditions) > 0 || orig.Status.AssociatedTo != nil ||
		next.Status.Phase != "" || orig.DeletionTimestamp != nil {
		return 0
	}
	if d := orig.CreationTimestamp.Add(firstReportWindow).Sub(now); d > 0 {
		return d
	}
	return 0
}
