package warm

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim/draw"
	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
)

// warmTarget is how many warm addresses of each family a class asks for
// (-1 when its parameters do not parse: keep what is there), its ranges,
// and whether the driver serves it (exists, ours, not being deleted).
func warmTarget(c *iadv1alpha1.IPAddressClass) (int, []classparams.AddressRange, bool) {
	if c == nil || c.Spec.Provisioner != names.Provisioner || c.DeletionTimestamp != nil {
		return 0, nil, false
	}
	p, err := classparams.ParseParameters(c.Spec.Parameters)
	if err != nil {
		return -1, nil, true
	}
	return int(p.WarmAddresses), p.Addresses, true
}

// warmClassOf is the class an address or a placeholder (a Service in the
// placeholder namespace) draws from, and whether it is warm: a warm
// address (marks.LabelWarm) or a warm placeholder. Anything else has no
// class.
func warmClassOf(o client.Object, placeholderNamespace string) (string, bool) {
	switch v := o.(type) {
	case *iadv1alpha1.IPAddress:
		return v.Spec.ClassName, v.Labels[marks.LabelWarm] == "true"
	case *corev1.Service:
		if v.Namespace != placeholderNamespace {
			return "", false
		}
		return v.Annotations[marks.KeyClass], v.Labels[marks.LabelPlaceholder] == names.PlaceholderWarm
	}
	return "", false
}

// warmPlan is what one family of a class needs.
type warmPlan struct {
	create int  // placeholders to draw
	full   bool // the ranges lack room for all that is missing
	// waiting counts the placeholders it keeps that wait for MetalLB.
	waiting int
	// record are the placeholders MetalLB gave an address in the ranges.
	record           []*corev1.Service
	dropPlaceholders []*corev1.Service
	dropAddresses    []*iadv1alpha1.IPAddress
}

// isWarm reports whether an address counts as warm: from the class's
// ranges, unbound, not being deleted, Available or not yet phased.
func isWarm(a *iadv1alpha1.IPAddress) bool {
	return a.Spec.ClaimRef == nil && a.DeletionTimestamp == nil && a.Spec.Source.FromClass != nil &&
		(a.Status.Phase == "" || a.Status.Phase == iadv1alpha1.AddressAvailable)
}

// isOurWarm reports whether a is a warm address the driver recorded for
// the class and nobody took since: only then may a placeholder hold it.
func isOurWarm(a *iadv1alpha1.IPAddress, className string) bool {
	return a.Labels[marks.LabelWarm] == "true" && a.Spec.ClassName == className && a.Spec.ClaimRef == nil &&
		a.Status.AssociatedTo == nil && a.Spec.Source.FromClass != nil
}

// planWarm decides what family f of a class needs from its target, the
// room in its ranges (size), its addresses and warm placeholders.
//
// After an edit of the ranges the pool keeps the old ones while an address
// lies outside the new. Then the driver's warm addresses outside are
// dropped, nothing new is asked of MetalLB and strays are given back; once
// every address is inside, a stray waits for the new pool to move it.
func planWarm(f iadv1alpha1.IPFamily, target int, size float64, ranges []classparams.AddressRange,
	addrs []iadv1alpha1.IPAddress, phs []*corev1.Service) warmPlan {
	warm, outside, used, shrinking := warmLedger(f, ranges, addrs)
	waiting, assigned, strays := warmDraws(f, ranges, phs)
	slices.SortFunc(outside, func(a, b *iadv1alpha1.IPAddress) int { return strings.Compare(a.Name, b.Name) })
	p := warmPlan{record: assigned, dropAddresses: outside, waiting: len(waiting)}
	if shrinking {
		p.waiting = 0
		p.dropPlaceholders = append(waiting, strays...)
		return p
	}
	have := len(warm) + len(waiting) + len(assigned) + len(strays)
	switch {
	case have < target:
		room := int(size) - used - len(waiting) - len(assigned)
		p.create = min(target-have, max(room, 0))
		p.full = p.create < target-have
	case have > target:
		surplus := have - target
		n := min(surplus, len(waiting))
		p.dropPlaceholders = waiting[:n]
		p.waiting -= n
		ours := oursLastFirst(warm)
		p.dropAddresses = ours[:min(surplus-n, len(ours))]
	}
	return p
}

// warmLedger sorts a class's addresses of family f: warm ones inside the
// ranges, the driver's warm ones outside, how many others take room, and
// whether a live address lies outside (shrinking).
func warmLedger(f iadv1alpha1.IPFamily, ranges []classparams.AddressRange, addrs []iadv1alpha1.IPAddress) (
	warm, outside []*iadv1alpha1.IPAddress, used int, shrinking bool) {
	for i := range addrs {
		a := &addrs[i]
		if names.AddressFamily(a.Spec.Address) != f {
			continue
		}
		ours := isWarm(a) && a.Labels[marks.LabelWarm] == "true"
		switch {
		case !classparams.InRanges(ranges, a.Spec.Address) && ours:
			outside = append(outside, a)
			shrinking = true
		case !classparams.InRanges(ranges, a.Spec.Address):
			shrinking = shrinking || a.DeletionTimestamp == nil
			used++
		default:
			used++
			if isWarm(a) {
				warm = append(warm, a)
			}
		}
	}
	return warm, outside, used, shrinking
}

// warmDraws sorts a class's live warm placeholders of family f: waiting
// for MetalLB, assigned an address in the ranges, or outside them.
func warmDraws(f iadv1alpha1.IPFamily, ranges []classparams.AddressRange, phs []*corev1.Service) (waiting, assigned, strays []*corev1.Service) {
	for _, ph := range phs {
		if ph.Annotations[marks.AnnotationFamily] != string(f) || ph.DeletionTimestamp != nil {
			continue
		}
		switch ip := draw.AssignedIP(ph, f); {
		case ip == "":
			waiting = append(waiting, ph)
		case !classparams.InRanges(ranges, ip):
			strays = append(strays, ph)
		default:
			assigned = append(assigned, ph)
		}
	}
	return waiting, assigned, strays
}

// oursLastFirst keeps the warm addresses the driver recorded (an admin's
// is not ours to delete), last names first: the core binds the first.
func oursLastFirst(warm []*iadv1alpha1.IPAddress) []*iadv1alpha1.IPAddress {
	var ours []*iadv1alpha1.IPAddress
	for _, a := range warm {
		if a.Labels[marks.LabelWarm] == "true" {
			ours = append(ours, a)
		}
	}
	slices.SortFunc(ours, func(a, b *iadv1alpha1.IPAddress) int { return strings.Compare(b.Name, a.Name) })
	return ours
}
