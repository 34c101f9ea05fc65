package service

import (
	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
)

// PinMarks are a Service's marks pinned for claim (marks.PinFor: the pin,
// and the sharing key when key is not empty), unless the Service carries a
// pin of its own, which stays the owner's; either way the owner's pool
// request moves aside (took says what moved) and, with class, the grant
// label goes on: the class pool admits only granted Services, hand-pinned
// ones too.
func PinMarks(m marks.Marks, claim, pin, key, class string) (out marks.Marks, took string) {
	hand := m.HandPin()
	took = m.TakeOverPool()
	if hand == "" {
		m.PinFor(claim, pin, key)
	}
	if class != "" {
		m.Grant = class
	}
	return m, took
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
