package names

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/types"
)

// sharingSecret is the HMAC key of every sharing key; nil until set.
var sharingSecret atomic.Pointer[[]byte]

// SetSharingSecret sets the secret sharing keys derive from. All three
// controllers need the same one and tenants must not read it, or a tenant
// could compute the key of an address it does not own.
func SetSharingSecret(secret []byte) {
	b := append([]byte(nil), secret...)
	sharingSecret.Store(&b)
}

// SharingSecretSet reports whether a sharing secret is in use.
func SharingSecretSet() bool {
	p := sharingSecret.Load()
	return p != nil && len(*p) > 0
}

const sharingKeyPrefix = "metallb-iad-"

// ClaimSharingKey is the allow-shared-ip value of every holder of an address
// bound to the claim. A Service carries one key for all its addresses, so a
// Dual claim's key belongs to the claim; the uid and secret make it differ
// for a recreated claim and unguessable to other tenants.
func ClaimSharingKey(namespace, name string, uid types.UID) string {
	return sharingKey("claim", namespace, name, string(uid))
}

// AddressSharingKey is the sharing key of an address no claim is bound to.
func AddressSharingKey(addressName string) string {
	return sharingKey("address", addressName)
}

// sharingKey hashes its parts, length-prefixed so no two lists collide, as
// an HMAC under the sharing secret when one is set.
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
