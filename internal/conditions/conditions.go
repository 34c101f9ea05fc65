// Package conditions defines the conditions the driver writes on IPAddresses,
// which with status.associatedTo are the controllers' only hand-offs.
package conditions

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// Held (IPAddress controller) is True while a placeholder holds the address,
	// False once every placeholder let go for a workload that cannot share; the
	// Service controller pins such a workload (gap handoff) only after that.
	Held = "Held"

	// Conflict (Service controller detects, IPAddress controller recovers) is
	// True while a Service holds the address without its binding's authority.
	Conflict = "Conflict"

	// Granted (IPAddress controller) is True while every holder carries the grant
	// label, which the class's pool requires of them.
	Granted = "Granted"

	// Lost (IPAddress controller) is True while MetalLB's configuration lacks
	// the address (class, pool or range gone), so MetalLB took it.
	Lost = "Lost"

	// ClassGone (IPAddress controller) is True while the class is gone and its
	// pool kept; binding and attachment stay until the address is released.
	ClassGone = "ClassGone"
)

// AttachmentServed (IPAddress controller) is False while MetalLB refuses
// the attached Service, with MetalLB's words; absent if it never failed.
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
	// ReasonSharedWithWorkload: the attached Service shares it with the hold placeholder.
	ReasonSharedWithWorkload  = "SharedWithWorkload"
	ReasonWaitingForMetalLB   = "WaitingForMetalLB"
	ReasonReleasedForWorkload = "ReleasedForWorkload"
	ReasonTakenElsewhere      = "TakenElsewhere"
	// ReasonImporting: the Service being imported holds the address itself.
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

// Set sets a condition and reports whether anything changed.
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
