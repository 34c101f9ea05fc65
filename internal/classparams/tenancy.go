package classparams

import (
	"fmt"
	"reflect"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Tenancy is who may claim from a class: namespaces by name and by label,
// in the shape of MetalLB's serviceAllocation, and how many of the class's
// addresses one namespace may hold.
type Tenancy struct {
	// Namespaces admits these namespaces by name.
	Namespaces []string
	// NamespaceSelectors admits the namespaces any of them selects.
	NamespaceSelectors []metav1.LabelSelector
	// MaxAddressesPerNamespace bounds the class's addresses one namespace
	// holds (a Dual claim holds two); 0: no bound.
	MaxAddressesPerNamespace int32

	selectors []labels.Selector
}

// Scoped reports whether the class names the namespaces it admits; a
// class that does not admits every namespace.
func (t Tenancy) Scoped() bool { return len(t.Namespaces) > 0 || len(t.NamespaceSelectors) > 0 }

// Admits reports whether a claim of the namespace named ns, with labels,
// may draw from the class.
func (t Tenancy) Admits(ns string, nsLabels map[string]string) bool {
	if !t.Scoped() || slices.Contains(t.Namespaces, ns) {
		return true
	}
	for _, s := range t.selectors {
		if s.Matches(labels.Set(nsLabels)) {
			return true
		}
	}
	return false
}

// parseTenancy validates the tenancy keys into p.Tenancy.
func (p *Parameters) parseTenancy(w wireParameters) []string {
	var problems []string
	p.Namespaces = w.Namespaces
	problems = append(problems, duplicates(paramsPath+".namespaces", w.Namespaces)...)
	for i, ns := range w.Namespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			problems = append(problems, fmt.Sprintf("%s.namespaces[%d]: %q is not a namespace name: %s", paramsPath, i, ns, errs[0]))
		}
	}
	p.NamespaceSelectors = w.NamespaceSelectors
	for i := range w.NamespaceSelectors {
		sel, err := metav1.LabelSelectorAsSelector(&w.NamespaceSelectors[i])
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s.namespaceSelectors[%d]: %v", paramsPath, i, err))
			continue
		case sel.Empty():
			problems = append(problems, fmt.Sprintf("%s.namespaceSelectors[%d] selects every namespace; leave namespaces and namespaceSelectors out to admit every namespace", paramsPath, i))
			continue
		}
		for j := range i {
			if reflect.DeepEqual(w.NamespaceSelectors[i], w.NamespaceSelectors[j]) {
				problems = append(problems, fmt.Sprintf("%s.namespaceSelectors[%d] repeats namespaceSelectors[%d]", paramsPath, i, j))
				break
			}
		}
		p.selectors = append(p.selectors, sel)
	}
	if m := w.MaxAddressesPerNamespace; m != nil {
		p.MaxAddressesPerNamespace = *m
		switch {
		case *m < 1:
			problems = append(problems, fmt.Sprintf("%s.maxAddressesPerNamespace: %d is not a number of addresses of 1 or more; leave it out for no bound", paramsPath, *m))
		case p.WarmAddresses > 0:
			// The core binds a warm address to any claim of the class,
			// whatever its namespace holds: the bound could not hold.
			problems = append(problems, fmt.Sprintf("%s.maxAddressesPerNamespace cannot be set with warmAddresses: the core binds warm addresses to any claim of the class, past any bound; use one or the other", paramsPath))
		}
	}
	return problems
}
