package names

import (
	"crypto/sha256"
	"encoding/hex"

	"k8s.io/apimachinery/pkg/types"
)

const importedSuffix = "-imported-"

// ImportedClaimName is the claim generated to import service's address:
// its name, "-imported-" and 8 hex digits of a hash of uid, at most 63
// characters. Deterministic so a crashed pass finds its claim again;
// distinct for a Service recreated under the same name.
func ImportedClaimName(service string, uid types.UID) string {
	sum := sha256.Sum256([]byte(uid))
	tail := importedSuffix + hex.EncodeToString(sum[:])[:8]
	if max := 63 - len(tail); len(service) > max {
		service = service[:max]
	}
	return service + tail
}
