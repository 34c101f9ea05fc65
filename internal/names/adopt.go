package names

import (
	"crypto/sha256"
	"encoding/hex"

	"k8s.io/apimachinery/pkg/types"
)

// Names of the import of addresses MetalLB assigned first (docs/design.md §9).
const (
	// LabelImported ("true") marks the claims and IPAddresses generated to
	// import an address MetalLB had already assigned to a plain Service.
	LabelImported = Domain + "imported"

	// AnnotationImportedService and AnnotationImportedServiceUID record the
	// source Service; the uid tells the driver's claim from a tenant's namesake.
	AnnotationImportedService    = Domain + "imported-service"
	AnnotationImportedServiceUID = Domain + "imported-service-uid"
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
