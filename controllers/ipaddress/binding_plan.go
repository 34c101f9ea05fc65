package ipaddress

import (
	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
)

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
