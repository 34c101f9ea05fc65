package names

import (
	"crypto/sha256"
	"encoding/hex"

	"k8s.io/apimachinery/pkg/types"
)

// Names of the import of addresses MetalLB assigned before the driver
// managed them (the class parameter adoptExisting).
const (
	// LabelImported ("true") marks the claims and IPAddresses the driver
	// generated to import an address MetalLB had already assigned to a
	// plain Service: kubectl get ipaddressclaims -A -l <LabelImported>.
	LabelImported = Domain + "imported"

	// AnnotationImportedService and AnnotationImportedServiceUID record, on
	// a generated claim and its IPAddress, the Service the address was
	// imported from: its name (in the claim's namespace) and uid. The uid
	// tells the driver's own claim from a tenant's claim of the same name.
	AnnotationImportedService    = Domain + "imported-service"
	AnnotationImportedServiceUID = Domain + "imported-service-uid"

	// AnnotationImportedInto marks a Service whose address the driver
	// imported; its value is the generated claim. It stays as a record.
	AnnotationImportedInto = Domain + "imported-into"
	// AnnotationOwnerPin records, on an imported Service, the MetalLB pin
	// its owner had written before the import. That pin stays the owner's:
	// the driver never withdraws it.
	AnnotationOwnerPin = Domain + "owner-pin"
	// AnnotationOwnerPool records, on a Service the driver pinned, the
	// MetalLB pool request (metallb.io/address-pool or its older spelling)
	// the driver removed in the same write as its pin: a pool that does not
	// hold the pinned address makes MetalLB refuse the pin. A record only;
	// the driver never writes a pool request back.
	AnnotationOwnerPool = Domain + "owner-address-pool"
)

// importedSuffix is the fixed middle part of a generated claim's name.
const importedSuffix = "-imported-"

// ImportedClaimName is the name of the claim generated to import the
// address of the Service named service with uid: the Service's name, then
// "-imported-" and 8 hexadecimal digits of a hash of the uid, at most 63
// characters (a long Service name is cut). It is deterministic, so a pass
// that crashed half-way finds its claim again, and it differs for a Service
// recreated under the same name.
func ImportedClaimName(service string, uid types.UID) string {
	sum := sha256.Sum256([]byte(uid))
	tail := importedSuffix + hex.EncodeToString(sum[:])[:8]
	if max := 63 - len(tail); len(service) > max {
		service = service[:max]
	}
	return service + tail
}
