// Package conditions defines the condition types and reasons the driver
// writes on IPAddresses, who writes each, and small setters for them.
//
// Hand-offs between the controllers are these conditions and
// status.associatedTo; the controllers never talk to each other directly.
package conditions

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// Held (written by the IPAddress controller) is True while a placeholder
	// Service pinned to the address holds it in MetalLB: alone while the
	// address is not attached (HeldByPlaceholder), or sharing it with the
	// attached Service in a shared attachment (SharedWithWorkload). It is
	// False once every placeholder is gone because the address is attached
	// to a workload that cannot share it (ReleasedForWorkload); the Service
	// controller pins such a workload (the gap handoff) only after that.
	Held = "Held"

	// Conflict (written by the Service controller when it detects, and by
	// the IPAddress controller when it recovers) is True while a Service
	// holds the address without its binding's authority.
	Conflict = "Conflict"

	// Granted (written by the IPAddress controller) is True while every
	// Service holding the address for the driver (its placeholders, the
	// Service it is attached to or being handed to) carries the class's
	// grant label, so MetalLB keeps their assignments once the class pool
	// admits only granted Services. The class controller adds that
	// requirement to a pool rendered without it only once every address of
	// the class is Granted.
	Granted = "Granted"

	// Lost (written by the IPAddress controller) is True while MetalLB's
	// configuration no longer contains the address (its class was deleted,
	// or the class's pool was deleted or no longer covers it), so MetalLB
	// took it from whoever held it; the phase is Lost meanwhile. It turns
	// False once the pool contains the address again.
	Lost = "Lost"

	// ClassGone (written by the IPAddress controller) is True while the
	// address's IPAddressClass does not exist (or is being deleted) and the
	// class's pool is kept for the addresses recorded under its name: the
	// binding and any attachment stay until the address is released. It
	// turns False when a class of that name is created again.
	ClassGone = "ClassGone"
)

// AttachmentServed (written by the IPAddress controller) is False while
// the address is attached to a Service that is pinned to it but holds none
// of it, because MetalLB refused the Service (RefusedByMetalLB, with
// MetalLB's words); it turns True once the Service holds the address or is
// no longer attached. An attachment that never failed carries no condition.
const AttachmentServed = "AttachmentServed"

// Reasons of AttachmentServed.
const (
	ReasonRefusedByMetalLB    = "RefusedByMetalLB"
	ReasonServiceHoldsAddress = "ServiceHoldsAddress"
)

// Reasons of ClassGone.
const (
	ReasonKeptUntilReleased = "KeptUntilReleased"
	ReasonClassReturned     = "ClassReturned"
)

// Reasons of Granted.
const (
	ReasonHoldersGranted   = "HoldersGranted"
	ReasonHolderNotGranted = "HolderNotGranted"
)

// Reasons of Held.
const (
	ReasonHeldByPlaceholder = "HeldByPlaceholder"
	// ReasonSharedWithWorkload: the address is attached to a Service that
	// shares it with the hold placeholder; both hold it, so a detach or the
	// Service's deletion leaves it held.
	ReasonSharedWithWorkload  = "SharedWithWorkload"
	ReasonWaitingForMetalLB   = "WaitingForMetalLB"
	ReasonReleasedForWorkload = "ReleasedForWorkload"
	ReasonTakenElsewhere      = "TakenElsewhere"
	// ReasonImporting: the Service the address is being imported from
	// holds it; no placeholder is created, the Service keeps it.
	ReasonImporting = "Importing"
)

// Reasons of Conflict.
const (
	ReasonUnauthorizedHolder = "UnauthorizedHolder"
	ReasonResolved           = "Resolved"
)

// Reasons of Lost.
const (
	// ReasonClassDeleted: the address's IPAddressClass is gone and so is its pool.
	ReasonClassDeleted = "ClassDeleted"
	// ReasonPoolMissing: the class's IPAddressPool does not exist.
	ReasonPoolMissing = "PoolMissing"
	// ReasonOutsidePool: the class's IPAddressPool does not contain the address.
	ReasonOutsidePool = "OutsidePool"
	// ReasonRangeReturned: the class's IPAddressPool contains the address again.
	ReasonRangeReturned = "RangeReturned"
)

// Set sets a condition on a list, keeping lastTransitionTime when the status
// does not change. It reports whether anything changed.
func Set(list *[]metav1.Condition, typ string, status metav1.ConditionStatus, reason, message string, generation int64) bool {
	old := meta.FindStatusCondition(*list, typ)
	if old != nil && old.Status == status && old.Reason == reason && old.Message == message && old.ObservedGeneration == generation {
		return false
	}
	meta.SetStatusCondition(list, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: generation,
	})
	return true
}

// IsTrue reports whether the condition typ is present and True.
func IsTrue(list []metav1.Condition, typ string) bool {
	return meta.IsStatusConditionTrue(list, typ)
}

// IsFalse reports whether the condition typ is present and False.
func IsFalse(list []metav1.Condition, typ string) bool {
	return meta.IsStatusConditionFalse(list, typ)
}
