package ipaddress

import (
	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/ipaddress/hold"
)

// scope carries what one pass fetched and what it changes. Reconcile builds
// it from the address; the first phases fill in the class, the IP and the
// pool. It is the hold's scope (hold.Scope: the address, its IP, key and
// pool, the Events after the status write) and what the other phases add.
type scope struct {
	hold.Scope
	// orig is the address as read, the base of the one status patch.
	orig *iadv1alpha1.IPAddress
	// class is the address's class (loadClass), nil when it does not exist.
	class *iadv1alpha1.IPAddressClass
	// lostTold is set when AfterPatch holds the address's AddressLost
	// Warnings: once they are handed to the recorder, the address counts
	// as told (lostAnnounced).
	lostTold bool
}

// rebase makes the address as written in the middle of a pass the base of
// the next status patch.
func (s *scope) rebase() {
	s.orig = s.Addr.DeepCopy()
	s.AfterPatch = nil
	s.lostTold = false
}
