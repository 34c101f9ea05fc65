package service

import (
	"fmt"
	"github.com/cozystack/metallb-iad/internal/binding"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/names"
)

// Event reasons of the import of addresses MetalLB assigned to plain
// Services before the driver managed them (class parameter adoptExisting).
const (
	// ReasonImported (Normal, on the Service, the generated claim and the
	// IPAddress): the Service's address is now an IPAddress bound to a
	// generated claim, attached to the Service.
	ReasonImported = "Imported"
	// ReasonImportSkippedPartlyInRange (Warning, on the Service): the
	// Service holds two addresses and only one lies in the class's ranges.
	ReasonImportSkippedPartlyInRange = "ImportSkippedPartlyInRange"
	// ReasonImportSkippedDualStack (Warning, on the Service): the Service
	// holds two addresses, both in the class's ranges; a dual-stack import
	// is not built.
	ReasonImportSkippedDualStack = "ImportSkippedDualStack"
	// ReasonImportSkippedSharedIP (Warning, on the Service): MetalLB lets
	// several Services share the address through a sharing key.
	ReasonImportSkippedSharedIP = "ImportSkippedSharedIP"
	// ReasonImportSkippedClaimNameTaken (Warning, on the Service and the
	// claim): the Service's namespace already has a claim of the generated
	// name that the driver did not generate for this Service.
	ReasonImportSkippedClaimNameTaken = "ImportSkippedClaimNameTaken"
	// ReasonImportSkippedPinMismatch (Warning, on the Service): the Service
	// carries a hand-written MetalLB pin that does not name the address it
	// holds.
	ReasonImportSkippedPinMismatch = "ImportSkippedPinMismatch"
	// ReasonImportFailed (Warning, on the Service): a step of the import
	// failed; it is retried.
	ReasonImportFailed = "ImportFailed"
)

// Results, the values of the "result" label of metallb_iad_imports_total.
const (
	importImported = "imported"
	importSkipped  = "skipped"
	importFailed   = "failed"
)

// AdoptClass is a class this driver serves whose parameters turn
// adoptExisting on.
type AdoptClass struct {
	Name    string
	Reclaim iadv1alpha1.ReclaimPolicy
	Params  classparams.Parameters
}

// ImportSituation is what one pass observed for the import decision.
type ImportSituation struct {
	Service              *corev1.Service
	PlaceholderNamespace string
	// Classes are the served classes with adoptExisting on.
	Classes []AdoptClass
	// Ledger maps an ingress IP (canonical) to its IPAddress, if any.
	Ledger map[string]*iadv1alpha1.IPAddress
	// Sharers maps an ingress IP to the other Services, "<namespace>/<name>",
	// that hold it too, placeholders excluded.
	Sharers map[string][]string
	// Claim is the claim of the generated name in the Service's namespace;
	// nil when there is none.
	Claim *iadv1alpha1.IPAddressClaim
	// Associated counts the addresses associated with the Service.
	Associated int
}

// ImportStep is what the import decision asks a pass to do.
type ImportStep int

const (
	// ImportNone: not an import candidate; the pass goes on as usual.
	ImportNone ImportStep = iota
	// ImportSkip: a candidate that must not be imported; a Warning Event
	// says why and the pass goes on as usual.
	ImportSkip
	// ImportRun: run (or resume) the import steps.
	ImportRun
	// ImportDone: imported; the Service is an ordinary association now.
	ImportDone
)

// ImportPlan is the import decision for one Service.
type ImportPlan struct {
	Step ImportStep
	// Class is the class whose ranges hold the address.
	Class *AdoptClass
	// IP is the address (canonical text) and AddressName its IPAddress.
	IP, AddressName string
	// Family is the address's family.
	Family iadv1alpha1.IPFamily
	// ClaimName is the generated claim's name.
	ClaimName string
	// HandPin is the owner's own pin, when there is one.
	HandPin string
	// Reason and Message are the Warning Event of a skip.
	Reason, Message string
}

// PlanImport is the import decision. It makes no API calls. A Service is a
// candidate when it is a LoadBalancer Service outside the placeholder
// namespace, not being deleted, not attached through a claim (no claim
// annotation, no associated address) unless it is this import's own claim,
// and MetalLB gave it an address in the ranges of a class with
// adoptExisting. An address already in the ledger for anything but this
// import is not imported: conflict detection judges it.
func PlanImport(s ImportSituation) ImportPlan {
	svc := s.Service
	if svc.DeletionTimestamp != nil || svc.Spec.Type != corev1.ServiceTypeLoadBalancer || binding.Exempt(svc, s.PlaceholderNamespace) {
		return ImportPlan{}
	}
	ips := binding.IngressIPs(svc)
	if len(ips) == 0 {
		return ImportPlan{}
	}
	claimAnn := strings.TrimSpace(svc.Annotations[iadv1alpha1.ServiceClaimAnnotation])
	into := svc.Annotations[names.AnnotationImportedInto]
	resuming := into != "" && claimAnn == into
	if !resuming && (claimAnn != "" || s.Associated > 0) {
		return ImportPlan{}
	}

	var in, out []string
	var cls *AdoptClass
	for _, ip := range ips {
		c := coveringClass(s.Classes, ip)
		if c == nil {
			out = append(out, ip)
			continue
		}
		in = append(in, ip)
		if cls == nil {
			cls = c
		}
	}
	if len(in) == 0 {
		return ImportPlan{}
	}
	p := ImportPlan{Class: cls, IP: in[0], ClaimName: names.ImportedClaimName(svc.Name, svc.UID)}
	if len(ips) > 1 {
		p.Step = ImportSkip
		if len(out) > 0 {
			p.Reason = ReasonImportSkippedPartlyInRange
			p.Message = fmt.Sprintf("Not imported: the Service holds %s, which lies in the ranges of IPAddressClass %s, and %s, which does not; "+
				"a claim cannot hold both, so neither is imported and the Service keeps them as they are",
				strings.Join(in, ","), cls.Name, strings.Join(out, ","))
		} else {
			p.Reason = ReasonImportSkippedDualStack
			p.Message = fmt.Sprintf("Not imported: the Service holds two addresses (%s) of IPAddressClass %s; importing a dual-stack Service is not supported, "+
				"so the Service keeps them as they are", strings.Join(in, ","), cls.Name)
		}
		return p
	}
	ip, _ := names.ParseAddress(p.IP)
	p.AddressName, _ = names.AddressName(ip)
	p.Family = iadv1alpha1.FamilyIPv4
	if !ip.Is4() {
		p.Family = iadv1alpha1.FamilyIPv6
	}
	p.HandPin = binding.HandPin(svc)
	if p.HandPin != "" && p.HandPin != p.IP {
		p.Step, p.Reason = ImportSkip, ReasonImportSkippedPinMismatch
		p.Message = fmt.Sprintf("Not imported: the Service holds %s (IPAddressClass %s) but its own MetalLB pin asks for %s; "+
			"make the pin name the address it holds, or remove it, to have it imported", p.IP, cls.Name, p.HandPin)
		return p
	}
	if others := s.Sharers[p.IP]; len(others) > 0 {
		p.Step, p.Reason = ImportSkip, ReasonImportSkippedSharedIP
		p.Message = fmt.Sprintf("Not imported: %s (IPAddressClass %s) is shared through a MetalLB sharing key with Service %s; "+
			"a claim serves one Service, so the address is left as it is", p.IP, cls.Name, strings.Join(others, ", "))
		return p
	}
	if a := s.Ledger[p.IP]; a != nil && !(resuming && ImportedFor(a, svc, p.ClaimName)) {
		// Already in the ledger, and not half-way through this import (the
		// Service is annotated before the address is created): conflict
		// detection's business. This is also what keeps an import undone by
		// the owner (claim annotation removed) from being run again.
		return ImportPlan{}
	}
	if c := s.Claim; c != nil {
		if !OwnImportClaim(c, svc, p) {
			p.Step, p.Reason = ImportSkip, ReasonImportSkippedClaimNameTaken
			p.Message = fmt.Sprintf("Not imported: %s (IPAddressClass %s) would be imported into a generated claim %s/%s, "+
				"but the namespace already has a claim of that name that the driver did not generate for this Service", p.IP, cls.Name, c.Namespace, c.Name)
			return p
		}
		if c.DeletionTimestamp != nil {
			return ImportPlan{}
		}
	}
	if a := s.Ledger[p.IP]; resuming && a != nil && AssociatedWith(a, svc.Namespace, svc.Name) {
		p.Step = ImportDone
		return p
	}
	p.Step = ImportRun
	return p
}

// coveringClass returns the class whose ranges hold ip, or nil.
func coveringClass(classes []AdoptClass, ip string) *AdoptClass {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return nil
	}
	for i := range classes {
		if classes[i].Params.Covers(addr) {
			return &classes[i]
		}
	}
	return nil
}

// ImportedFor reports whether the address is the one this driver imports
// from svc: pre-bound to the generated claim in the Service's namespace and
// recording the Service's uid.
func ImportedFor(a *iadv1alpha1.IPAddress, svc *corev1.Service, claimName string) bool {
	ref := a.Spec.ClaimRef
	return ref != nil && ref.Namespace == svc.Namespace && ref.Name == claimName &&
		a.Annotations[names.AnnotationImportedServiceUID] == string(svc.UID)
}

// OwnImportClaim reports whether a claim of the generated name is the one
// the driver generates for this import: labelled as imported, recording the
// Service's uid, and asking for exactly the imported address of the class.
func OwnImportClaim(c *iadv1alpha1.IPAddressClaim, svc *corev1.Service, p ImportPlan) bool {
	return c.Labels[names.LabelImported] == "true" &&
		c.Annotations[names.AnnotationImportedServiceUID] == string(svc.UID) &&
		c.Spec.AddressName == p.AddressName && c.Spec.ClassName == p.Class.Name
}

// ImportedClaim is the claim generated to import the plan's address from
// svc. spec.addressName names the imported address: the core then binds the
// claim to that address alone, and the claim controller, which serves only
// claims without spec.addressName, never provisions another one for it.
func ImportedClaim(svc *corev1.Service, p ImportPlan) *iadv1alpha1.IPAddressClaim {
	c := &iadv1alpha1.IPAddressClaim{}
	c.Namespace, c.Name = svc.Namespace, p.ClaimName
	c.Labels = map[string]string{names.LabelImported: "true"}
	c.Annotations = map[string]string{
		names.AnnotationImportedService:    index.Key(svc.Namespace, svc.Name),
		names.AnnotationImportedServiceUID: string(svc.UID),
	}
	c.Spec = iadv1alpha1.IPAddressClaimSpec{ClassName: p.Class.Name, Family: p.Family, AddressName: p.AddressName}
	return c
}

// ImportedAddress is the IPAddress of the plan's address, pre-bound to the
// generated claim (with its uid), reclaim policy from the class, carved from
// the class's ranges, with the driver's teardown finalizer.
func ImportedAddress(svc *corev1.Service, claim *iadv1alpha1.IPAddressClaim, p ImportPlan) *iadv1alpha1.IPAddress {
	a := &iadv1alpha1.IPAddress{}
	a.Name = p.AddressName
	a.Labels = map[string]string{names.LabelImported: "true"}
	a.Annotations = map[string]string{
		names.AnnotationImportedService:    index.Key(svc.Namespace, svc.Name),
		names.AnnotationImportedServiceUID: string(svc.UID),
	}
	a.Finalizers = []string{names.Finalizer}
	reclaim := p.Class.Reclaim
	if reclaim == "" {
		reclaim = iadv1alpha1.ReclaimRetain
	}
	a.Spec = iadv1alpha1.IPAddressSpec{
		Address:       p.IP,
		ClassName:     p.Class.Name,
		ReclaimPolicy: reclaim,
		ClaimRef:      &iadv1alpha1.ClaimReference{Namespace: claim.Namespace, Name: claim.Name, UID: string(claim.UID)},
		Source:        iadv1alpha1.IPAddressSource{FromClass: &iadv1alpha1.FromClassSource{}},
	}
	return a
}

// ImportAnnotations is what the import makes of the Service's annotations:
// the claim annotation and the imported-into marker naming the generated
// claim and then either, when the owner pinned the address by hand, the
// owner-pin record (the pin stays the owner's and is never withdrawn), or
// the driver's pin and pinned-by marker, plus the claim's sharing key and
// the shared-by marker when the Service can share (key not empty), exactly
// as an attach leaves them. The input is not modified.
func ImportAnnotations(in map[string]string, p ImportPlan, key string) map[string]string {
	var out map[string]string
	if p.HandPin != "" {
		out = binding.CloneAnnotations(in)
		binding.TakeOverPool(out)
		out[names.AnnotationOwnerPin] = p.HandPin
	} else {
		out = PinAnnotations(in, p.ClaimName, p.IP, key)
	}
	out[iadv1alpha1.ServiceClaimAnnotation] = p.ClaimName
	out[names.AnnotationImportedInto] = p.ClaimName
	return out
}

// Messages of the Imported Events.

func msgImportedService(p ImportPlan, namespace string) string {
	how := "the driver pinned it there"
	if p.HandPin != "" {
		how = "its own pin stays and stays the owner's"
	}
	return fmt.Sprintf("Imported %s, which MetalLB had assigned to this Service, into IPAddressClaim %s/%s (IPAddress %s, IPAddressClass %s): "+
		"the Service keeps the address and is attached through the claim; %s", p.IP, namespace, p.ClaimName, p.AddressName, p.Class.Name, how)
}

func msgImportedClaim(p ImportPlan, namespace, service string) string {
	return fmt.Sprintf("Generated to import %s from Service %s/%s (IPAddress %s, IPAddressClass %s); deleting this claim gives the address up",
		p.IP, namespace, service, p.AddressName, p.Class.Name)
}

func msgImportedAddress(p ImportPlan, namespace, service string) string {
	return fmt.Sprintf("Imported from Service %s/%s, to which MetalLB had assigned it; bound to generated claim %s/%s and attached to the Service",
		namespace, service, namespace, p.ClaimName)
}

func msgClaimNameTaken(p ImportPlan, namespace, service string) string {
	return fmt.Sprintf("The driver would generate this claim to import %s from Service %s/%s, but it exists and was not generated for that Service; the import is skipped",
		p.IP, namespace, service)
}
