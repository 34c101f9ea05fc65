package sharingkey

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash"

	"k8s.io/apimachinery/pkg/types"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
)

// Keys derives the sharing keys (MetalLB's allow-shared-ip) every holder
// of an address carries. The claim, service and IPAddress controllers
// need the same secret, and tenants must not read it, or a tenant could
// compute the key of an address it does not own. The zero Keys has no
// secret: keys are plain hashes (tests, and a driver run without one).
type Keys struct {
	secret string
}

// NewKeys returns the Keys of secret.
func NewKeys(secret []byte) Keys { return Keys{secret: string(secret)} }

// Secret reports whether the keys are keyed by a secret.
func (k Keys) Secret() bool { return k.secret != "" }

const sharingKeyPrefix = "metallb-iad-"

// Of is the sharing key of every holder of the address. It derives from
// the claim, so both addresses of a Dual claim share one key, or from the
// address name when unbound.
func (k Keys) Of(a *iadv1alpha1.IPAddress) string {
	if ref := a.Spec.ClaimRef; ref != nil && ref.Name != "" {
		return k.Claim(ref.Namespace, ref.Name, types.UID(ref.UID))
	}
	return k.Address(a.Name)
}

// Claim is the key of every holder of an address bound to the claim. A
// Service carries one key for all its addresses, so a Dual claim's key
// belongs to the claim; the uid and secret make it differ for a recreated
// claim and unguessable to other tenants.
func (k Keys) Claim(namespace, name string, uid types.UID) string {
	return k.hash("claim", namespace, name, string(uid))
}

// Address is the key of an address no claim is bound to.
func (k Keys) Address(addressName string) string {
	return k.hash("address", addressName)
}

// hash hashes its parts, length-prefixed so no two lists collide, as an
// HMAC under the secret when there is one.
func (k Keys) hash(parts ...string) string {
	var h hash.Hash
	if k.secret != "" {
		h = hmac.New(sha256.New, []byte(k.secret))
	} else {
		h = sha256.New()
	}
	for _, p := range parts {
		var n [4]byte
		n[0], n[1], n[2], n[3] = byte(len(p)>>24), byte(len(p)>>16), byte(len(p)>>8), byte(len(p))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return sharingKeyPrefix + hex.EncodeToString(h.Sum(nil))[:32]
}
