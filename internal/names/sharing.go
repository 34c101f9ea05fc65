package names

import (
	"crypto/sha256"
	"encoding/hex"

	"k8s.io/apimachinery/pkg/types"
)

// sharingKeyPrefix starts every MetalLB sharing key the driver writes.
const sharingKeyPrefix = "metallb-iad-"

// ClaimSharingKey is the metallb.io/allow-shared-ip value on every
// placeholder of an address bound to the claim namespace/name with uid, and
// on a workload Service sharing those addresses during a handoff.
//
// MetalLB lets Services share an IP only when they carry the same key, and a
// Service carries one key for all its addresses; a Dual claim's two
// addresses are held by two placeholders and attached to one dual-stack
// Service, so the key belongs to the claim, not to one address. It is a
// hash of the claim's identity: stable for the claim's life, different for
// a claim recreated under the same name, and not something another tenant
// can read off the Service.
func ClaimSharingKey(namespace, name string, uid types.UID) string {
	return sharingKey("claim", namespace, name, string(uid))
}

// AddressSharingKey is the sharing key on the placeholder of an address no
// claim is bound to (Available, or Released without a claim reference).
func AddressSharingKey(addressName string) string {
	return sharingKey("address", addressName)
}

// sharingKey hashes its parts, each length-prefixed so that no two
// different lists hash alike, into a key of 12+32 characters.
func sharingKey(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		var n [4]byte
		n[0], n[1], n[2], n[3] = byte(len(p)>>24), byte(len(p)>>16), byte(len(p)>>8), byte(len(p))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return sharingKeyPrefix + hex.EncodeToString(h.Sum(nil))[:32]
}
