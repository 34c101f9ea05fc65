// Package marks is the one model of how a Service is marked: what it asks
// of MetalLB (a pool, a pin, a sharing key, in either spelling) and which
// of that the driver wrote (the pinned-by and shared-by markers, the grant
// label, the owner's pin and pool it keeps). Of reads a Service into a
// Marks; the edits below change the Marks; Apply writes back exactly the
// marks that changed. Every controller reads and writes marks this way.
//
// The package also holds the rules built on the marks that two
// controllers must apply alike: who a binding authorizes (marks.go),
// who holds an address (holders.go), when a Service can share an address
// with its hold (share.go), the release sequence (release.go) and the
// sharing key (sharingkey.go).
package marks

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/names"
)

// Requests are the marks the driver writes. An empty field is an absent
// mark.
type Requests struct {
	// Pool, Pin and Sharing are MetalLB's address-pool, loadBalancerIPs and
	// allow-shared-ip; the Legacy ones their deprecated spellings, which the
	// driver only ever removes.
	Pool, LegacyPool       string
	Pin, LegacyPin         string
	Sharing, LegacySharing string

	// PinnedBy and SharedBy name the claim for which the driver wrote the
	// pin and the sharing key: the driver withdraws only what they mark.
	PinnedBy, SharedBy string

	// OwnerPin and OwnerPool keep the owner's own pin (an imported Service)
	// and pool request (moved aside by takeOverPool); never written back.
	OwnerPin, OwnerPool string

	// Grant is the grant label: the class whose pool may serve the Service.
	Grant string
}

// Marks is a Service's marks as read, the driver's (Requests) and the
// owner's requests it only reads.
type Marks struct {
	Requests

	// Claim is the tenant's request for a claim's addresses.
	Claim string
	// SpecPin is spec.loadBalancerIP, the oldest way to pin.
	SpecPin string

	namespace string
	// ownSharing and ownLegacySharing: the Service carries the key
	// annotation, even empty, which the driver must not overwrite.
	ownSharing, ownLegacySharing bool
	read                         Requests
}

// Of reads svc's marks.
func Of(svc *corev1.Service) Marks {
	ann, labels := svc.Annotations, svc.Labels
	r := Requests{
		Pool: ann[KeyPool], LegacyPool: ann[KeyLegacyPool],
		Pin: ann[KeyPin], LegacyPin: ann[KeyLegacyPin],
		Sharing: ann[KeySharing], LegacySharing: ann[KeyLegacySharing],
		PinnedBy: ann[KeyPinnedBy], SharedBy: ann[KeySharedBy],
		OwnerPin: ann[KeyOwnerPin], OwnerPool: ann[KeyOwnerPool],
		Grant: labels[LabelGrant],
	}
	_, ownSharing := ann[KeySharing]
	_, ownLegacySharing := ann[KeyLegacySharing]
	return Marks{Requests: r, read: r, namespace: svc.Namespace, ownSharing: ownSharing, ownLegacySharing: ownLegacySharing, Claim: strings.TrimSpace(ann[iadv1alpha1.ServiceClaimAnnotation]), SpecPin: svc.Spec.LoadBalancerIP}
}

// Apply writes to svc the marks changed since Of, and only those: a
// changed mark emptied is removed, any other set. On a Service built here
// (a placeholder) it writes every mark that is not empty.
func (m Marks) Apply(svc *corev1.Service) {
	type field struct {
		key       string
		now, read string
	}
	annotations := []field{
		{KeyPool, m.Pool, m.read.Pool}, {KeyLegacyPool, m.LegacyPool, m.read.LegacyPool},
		{KeyPin, m.Pin, m.read.Pin}, {KeyLegacyPin, m.LegacyPin, m.read.LegacyPin},
		{KeySharing, m.Sharing, m.read.Sharing}, {KeyLegacySharing, m.LegacySharing, m.read.LegacySharing},
		{KeyPinnedBy, m.PinnedBy, m.read.PinnedBy}, {KeySharedBy, m.SharedBy, m.read.SharedBy},
		{KeyOwnerPin, m.OwnerPin, m.read.OwnerPin}, {KeyOwnerPool, m.OwnerPool, m.read.OwnerPool},
	}
	var ann map[string]string
	for _, f := range annotations {
		if f.now == f.read {
			continue
		}
		if ann == nil {
			ann = clone(svc.Annotations)
		}
		put(ann, f.key, f.now)
	}
	if ann != nil {
		svc.Annotations = ann
	}
	if m.Grant != m.read.Grant {
		svc.Labels = clone(svc.Labels)
		put(svc.Labels, LabelGrant, m.Grant)
	}
}

// Changed reports whether Apply would write anything.
func (m Marks) Changed() bool { return m.Requests != m.read }

// clone copies a map; nil gives an empty one.
func clone(in map[string]string) map[string]string {
	out := make(map[string]string, len(in)+2)
	for k, v := range in {
		out[k] = v
	}
	return out
}

// put sets key, or removes it when value is empty.
func put(m map[string]string, key, value string) {
	if value == "" {
		delete(m, key)
	} else {
		m[key] = value
	}
}

// ClaimOf is the claim obj's annotation names ("" for none): the
// tenant's request, as Of reads it, for readers holding an object.
func ClaimOf(obj metav1.Object) string {
	return strings.TrimSpace(obj.GetAnnotations()[KeyClaim])
}

// ClaimNameProblem says why name, read from a tenant's annotation, is
// not the name of a claim ("" when it may be one): claims are named as
// DNS subdomains. A name with a problem is never looked up, and never
// quoted whole (Shown).
func ClaimNameProblem(name string) string {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return strings.Join(errs, "; ")
	}
	return ""
}

// shownMax bounds how much of a value a tenant wrote a message quotes.
const shownMax = 63

// Shown is value quoted for a message, cut to its first shownMax bytes.
func Shown(value string) string {
	if len(value) <= shownMax {
		return strconv.Quote(value)
	}
	cut := shownMax
	for cut > 0 && !utf8.RuneStart(value[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(value[:cut]), len(value))
}

// ImportedInto is the claim an import generated for obj ("" for none).
func ImportedInto(obj metav1.Object) string { return obj.GetAnnotations()[KeyImportedInto] }

// Imported is a copy of a Service's annotations once imported into claim:
// the claim annotation and the imported-into marker.
func Imported(annotations map[string]string, claim string) map[string]string {
	out := clone(annotations)
	out[KeyClaim] = claim
	out[KeyImportedInto] = claim
	return out
}

// RetriedAt is when the driver last handed svc back to MetalLB (the retry
// mark); ok is false without one.
func RetriedAt(svc *corev1.Service) (at time.Time, ok bool) {
	t, err := time.Parse(time.RFC3339Nano, svc.Annotations[KeyMetalLBRetry])
	return t, err == nil
}

// HasRetry says svc carries the retry mark, parsable or not.
func HasRetry(svc *corev1.Service) bool {
	_, ok := svc.Annotations[KeyMetalLBRetry]
	return ok
}

// RetryPatch is the merge patch that sets the retry mark to at, or
// removes it (nil), and touches nothing else.
func RetryPatch(at *time.Time) ([]byte, error) {
	var v any
	if at != nil {
		v = at.UTC().Format(time.RFC3339Nano)
	}
	return json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{KeyMetalLBRetry: v}}})
}

// StaleClearer are the annotations of the headless Service that makes
// MetalLB forget a stale allocation, marked with marker.
func StaleClearer(marker string) map[string]string {
	return map[string]string{KeyClearsStaleAllocation: marker}
}

// PinIPs returns the canonical IPs of the pin; text that does not parse
// is skipped.
func (m Marks) PinIPs() []string { return names.SplitIPs(m.Pin) }

// Edit reads svc's marks, lets edit change them and writes back what
// changed.
func Edit(svc *corev1.Service, edit func(m *Marks)) {
	m := Of(svc)
	edit(&m)
	m.Apply(svc)
}

// Mark writes r's marks on svc, a Service being built (a placeholder),
// and returns it.
func Mark(svc *corev1.Service, r Requests) *corev1.Service {
	Marks{Requests: r}.Apply(svc)
	return svc
}

// annotationsChanged reports whether Apply would write an annotation (a
// change of the grant label alone does not count).
func (m Marks) annotationsChanged() bool {
	now, read := m.Requests, m.read
	now.Grant, read.Grant = "", ""
	return now != read
}
