package warm

import (
	corev1 "k8s.io/api/core/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim/draw"
	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/phase"
)

// warmScope is what one pass over a class works from.
type warmScope struct {
	// class is nil when it is gone; name is the class's.
	class *iadv1alpha1.IPAddressClass
	name  string
	// target, ranges and served are the class's (warmTarget).
	target int
	ranges []classparams.AddressRange
	served bool
	// addrs and phs are the class's ledger and warm placeholders, read
	// under its lock.
	addrs []iadv1alpha1.IPAddress
	phs   []*corev1.Service
	// book is the class's once decideFills took its lock; fills are the
	// families' plans, decided under it.
	book  *draw.Book
	fills map[iadv1alpha1.IPFamily]*warmFill
}

// warmFill is one family's plan and the draws entered in the book for it.
type warmFill struct {
	plan   warmPlan
	target int
	// heldBack is what the refill waits for when the plan's draws may
	// not be made now (mayRefill).
	heldBack *phase.Result
	// draws name the plan's draws in the class's book until they are made.
	draws []string
}

// settle takes the draws the pass did not make out of the book.
func (s *warmScope) settle() {
	for _, fill := range s.fills {
		for _, name := range fill.draws {
			s.book.Settle(name)
		}
		fill.draws = nil
	}
}
