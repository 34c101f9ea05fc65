package draw

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/placeholder"
)

// ServiceFamily is the Kubernetes IP family of an address family.
func ServiceFamily(f iadv1alpha1.IPFamily) corev1.IPFamily {
	if f == iadv1alpha1.FamilyIPv6 {
		return corev1.IPv6Protocol
	}
	return corev1.IPv4Protocol
}

// reclaimPolicy is the class's policy for a new address, Retain if unset.
func reclaimPolicy(class *iadv1alpha1.IPAddressClass) iadv1alpha1.ReclaimPolicy {
	if class.Spec.ReclaimPolicy == "" {
		return iadv1alpha1.ReclaimRetain
	}
	return class.Spec.ReclaimPolicy
}

// RenderPlaceholder is the allocation placeholder drawing the claim's
// address of one family from the class pool, named from the claim uid.
func RenderPlaceholder(namespace string, c *iadv1alpha1.IPAddressClaim, class string, f iadv1alpha1.IPFamily) *corev1.Service {
	return marks.Mark(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      placeholder.AllocationName(c.UID, string(f)),
			Labels: map[string]string{
				marks.LabelPlaceholder: names.PlaceholderAllocation,
				marks.LabelClaimUID:    string(c.UID),
			},
			Annotations: map[string]string{
				marks.AnnotationClaimNamespace: c.Namespace,
				marks.AnnotationClaimName:      c.Name,
				marks.AnnotationFamily:         string(f),
				marks.KeyClass:                 class,
			},
		},
		Spec: placeholder.Spec(ServiceFamily(f)),
	}, marks.Requests{Pool: names.PoolName(class), Grant: class})
}

// RenderAddress is the IPAddress recording a drawn address for a claim,
// pre-bound to the claim's uid, with the driver's teardown finalizer.
func RenderAddress(claim *iadv1alpha1.IPAddressClaim, class *iadv1alpha1.IPAddressClass, ip, addrName string) *iadv1alpha1.IPAddress {
	return &iadv1alpha1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{
			Name:       addrName,
			Finalizers: []string{marks.Finalizer},
		},
		Spec: iadv1alpha1.IPAddressSpec{
			Address:       ip,
			ClassName:     class.Name,
			ReclaimPolicy: reclaimPolicy(class),
			ClaimRef: &iadv1alpha1.ClaimReference{
				Namespace: claim.Namespace,
				Name:      claim.Name,
				UID:       string(claim.UID),
			},
			Source: iadv1alpha1.IPAddressSource{FromClass: &iadv1alpha1.FromClassSource{}},
		},
	}
}

// RenderWarmPlaceholder is a placeholder of no claim drawing from the
// class pool, named by the API server.
func RenderWarmPlaceholder(namespace, className string, f iadv1alpha1.IPFamily) *corev1.Service {
	return marks.Mark(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:    namespace,
			GenerateName: "warm-" + strings.ToLower(string(f)) + "-",
			Labels:       map[string]string{marks.LabelPlaceholder: names.PlaceholderWarm},
			Annotations: map[string]string{
				marks.AnnotationFamily: string(f),
				marks.KeyClass:         className,
			},
		},
		Spec: placeholder.Spec(ServiceFamily(f)),
	}, marks.Requests{Pool: names.PoolName(className), Grant: className})
}

// RenderWarmAddress is the IPAddress recording a warm address: no
// claimRef, so the core makes it Available for the next claim.
func RenderWarmAddress(c *iadv1alpha1.IPAddressClass, ip, addrName string) *iadv1alpha1.IPAddress {
	return &iadv1alpha1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{
			Name:       addrName,
			Labels:     map[string]string{marks.LabelWarm: "true"},
			Finalizers: []string{marks.Finalizer},
		},
		Spec: iadv1alpha1.IPAddressSpec{
			Address:       ip,
			ClassName:     c.Name,
			ReclaimPolicy: reclaimPolicy(c),
			Source:        iadv1alpha1.IPAddressSource{FromClass: &iadv1alpha1.FromClassSource{}},
		},
	}
}

// AssignedIP is the canonical address of family f MetalLB reports in the
// placeholder's status, "" while there is none.
func AssignedIP(svc *corev1.Service, f iadv1alpha1.IPFamily) string {
	for _, in := range svc.Status.LoadBalancer.Ingress {
		ip, err := names.ParseAddress(in.IP)
		if err != nil {
			continue
		}
		if names.AddressFamily(ip.String()) == f {
			return ip.String()
		}
	}
	return ""
}

// HandedOver reports whether ph is a's hold already: labelled, owned,
// granted the class's pool and pinned to ip.
func HandedOver(ph *corev1.Service, a *iadv1alpha1.IPAddress, ip, class string) bool {
	return ph.Labels[marks.LabelPlaceholder] == names.PlaceholderHold && ph.Labels[marks.LabelAddress] == a.Name &&
		placeholder.OwnedByAddress(ph, a.Name) && marks.Of(ph).Granted(class) && (ip == "" || marks.Of(ph).Pin == ip)
}

// BindsClaim reports whether an address's claimRef names the claim: same
// namespace and name, uid empty (not yet accepted by the core) or equal.
func BindsClaim(a *iadv1alpha1.IPAddress, namespace, name string, uid types.UID) bool {
	r := a.Spec.ClaimRef
	return r != nil && r.Namespace == namespace && r.Name == name && (r.UID == "" || r.UID == string(uid))
}

// LedgerAnswer is what the ledger says about an address MetalLB assigned.
type LedgerAnswer int

const (
	LedgerFree LedgerAnswer = iota
	// LedgerOurs: its entry is the owner's: finish recording.
	LedgerOurs
	// LedgerGoing: only entries being deleted record it: wait.
	LedgerGoing
	// LedgerTaken: a live entry records it for someone else: give it back.
	LedgerTaken
)

// LedgerVerdict judges the entries recording an IP for claim c, with the
// deciding entry (nil for LedgerFree).
func LedgerVerdict(entries []iadv1alpha1.IPAddress, c *iadv1alpha1.IPAddressClaim) (LedgerAnswer, *iadv1alpha1.IPAddress) {
	var going *iadv1alpha1.IPAddress
	var taken *iadv1alpha1.IPAddress
	for i := range entries {
		a := &entries[i]
		switch {
		case BindsClaim(a, c.Namespace, c.Name, c.UID):
			return LedgerOurs, a
		case a.DeletionTimestamp != nil:
			if going == nil {
				going = a
			}
		case taken == nil:
			taken = a
		}
	}
	switch {
	case taken != nil:
		return LedgerTaken, taken
	case going != nil:
		return LedgerGoing, going
	}
	return LedgerFree, nil
}
