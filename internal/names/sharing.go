package names

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/types"
)

// sharingSecret keys every sharing key (an HMAC-SHA256 key); nil until
// SetSharingSecret is called.
var sharingSecret atomic.Pointer[[]byte]

// SetSharingSecret sets the secret every sharing key is derived from. The
// claim, IPAddress and service controllers must use the same secret (the
// chart mounts one Secret into all three); tenants must not be able to read
// it. Without a secret, keys are plain hashes of names tenants can know,
// so a tenant could compute the key of an address it does not own.
func SetSharingSecret(secret []byte) {
	b := append([]byte(nil), secret...)
	sharingSecret.Store(&b)
}

// SharingSecretSet reports whether a sharing secret is in use.
func SharingSecretSet() bool {
	p := sharingSecret.Load()
	return p != nil && len(*p) > 0
}

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
// a claim recreated under the same name, and, keyed by the sharing secret
// (SetSharingSecret), not something another tenant can compute or read off
// a Service it does not own.
func ClaimSharingKey(namespace, name string, uid types.UID) string {
	return sharingKey("claim", namespace, name, string(uid))
}

// AddressSharingKey is the sharing key on the placeholder of an address no
// claim is bound to (Available, or Released without a claim reference).
func AddressSharingKey(addressName string) string {
	return sharingKey("address", addressName)
}

// sharingKey hashes its parts, each length-prefixed so that no two
// different lists hash alike, into a key of 12+32 characters: an
// HMAC-SHA256 under the sharing secret when one is set, so that nobody
// without the secret can compute a key from the names it derives from.
func sharingKey(parts ...string) string {
	h := sha256.New()
	if p := sharingSecret.Load(); p != nil && len(*p) > 0 {
		h = hmac.New(sha256.New, *p)
	}
	for _, p := range parts {
		var n [4]byte
		n[0], n[1], n[2], n[3] = byte(len(p)>>24), byte(len(p)>>16), byte(len(p)>>8), byte(len(p))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return sharingKeyPrefix + hex.EncodeToString(h.Sum(nil))[:32]
}
