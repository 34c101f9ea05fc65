package service

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
)

// AdoptClass is a served class with adoptExisting on.
type AdoptClass struct {
	Name    string
	Reclaim iadv1alpha1.ReclaimPolicy
	Params  classparams.Parameters
}

// ImportSituation is what one pass observed for the import decision.
type ImportSituation struct {
	Service              *corev1.Service
	PlaceholderNamespace string
	Classes              []AdoptClass
	// Ledger maps an ingress IP (canonical) to its IPAddress, if any.
	Ledger map[string]*iadv1alpha1.IPAddress
	// Sharers maps an ingress IP to the other Services holding it,
	// placeholders excluded.
	Sharers map[string][]string
	// Claim is the claim of the generated name, nil when there is none.
	Claim *iadv1alpha1.IPAddressClaim
	// Associated counts the addresses associated with the Service.
	Associated int
}

// ImportStep is what the import decision asks a pass to do.
type ImportStep int

const (
	// ImportNone: not a candidate.
	ImportNone ImportStep = iota
	// ImportSkip: a candidate not to import; a Warning Event says why.
	ImportSkip
	// ImportRun: run (or resume) the import steps.
	ImportRun
	// ImportDone: imported; an ordinary association now.
	ImportDone
)

// ImportPlan is the import decision for one Service.
type ImportPlan struct {
	Step ImportStep
	// Class is the class whose ranges hold IP (canonical text).
	Class           *AdoptClass
	IP, AddressName string
	Family          iadv1alpha1.IPFamily
	ClaimName       string
	// HandPin is the owner's own pin, when there is one.
	HandPin string
	// Reason and Message are the Warning Event of a skip.
	Reason, Message string
}

// PlanImport is the import decision. It makes no API calls. A candidate
// is a LoadBalancer Service outside the placeholder namespace, not being
// deleted, not attached through a claim unless it is this import's own,
// holding an address in the ranges of a class with adoptExisting.
func PlanImport(s ImportSituation) ImportPlan {
	svc := s.Service
	ips, resuming, ok := importCandidate(s)
	if !ok {
		return ImportPlan{}
	}
	in, out, cls := splitByClass(s.Classes, ips)
	if len(in) == 0 {
		return ImportPlan{}
	}
	p := ImportPlan{Class: cls, IP: in[0], ClaimName: names.ImportedClaimName(svc.Name, svc.UID)}
	if len(ips) > 1 {
		return skipSeveral(p, in, out)
	}
	ip, _ := names.ParseAddress(p.IP)
	p.AddressName, _ = names.AddressName(ip)
	p.Family = iadv1alpha1.FamilyIPv4
	if !ip.Is4() {
		p.Family = iadv1alpha1.FamilyIPv6
	}
	p.HandPin = marks.Of(svc).HandPin()
	return planOne(s, p, resuming)
}

// importCandidate returns the Service's ingress IPs when it may be
// imported; resuming: it is annotated for this import already.
func importCandidate(s ImportSituation) (ips []string, resuming, ok bool) {
	svc := s.Service
	if svc.DeletionTimestamp != nil || svc.Spec.Type != corev1.ServiceTypeLoadBalancer || marks.Exempt(svc, s.PlaceholderNamespace) {
		return nil, false, false
	}
	ips = marks.IngressIPs(svc)
	claimAnn := marks.Of(svc).Claim
	into := marks.ImportedInto(svc)
	resuming = into != "" && claimAnn == into
	if len(ips) == 0 || (!resuming && (claimAnn != "" || s.Associated > 0)) {
		return nil, false, false
	}
	return ips, resuming, true
}

// splitByClass splits ips into those in a class's ranges and the others;
// cls is the class of the first in range.
func splitByClass(classes []AdoptClass, ips []string) (in, out []string, cls *AdoptClass) {
	for _, ip := range ips {
		c := coveringClass(classes, ip)
		if c == nil {
			out = append(out, ip)
			continue
		}
		in = append(in, ip)
		if cls == nil {
			cls = c
		}
	}
	return in, out, cls
}

// skipSeveral is the skip of a Service holding two addresses.
func skipSeveral(p ImportPlan, in, out []string) ImportPlan {
	p.Step = ImportSkip
	if len(out) > 0 {
		p.Reason = ReasonImportSkippedPartlyInRange
		p.Message = msgSkippedPartlyInRange(in, p.Class.Name, out)
		return p
	}
	p.Reason = ReasonImportSkippedDualStack
	p.Message = msgSkippedDualStack(in, p.Class.Name)
	return p
}

// planOne decides the import of a Service holding one address in range.
func planOne(s ImportSituation, p ImportPlan, resuming bool) ImportPlan {
	svc, cls := s.Service, p.Class
	if p.HandPin != "" && p.HandPin != p.IP {
		p.Step, p.Reason = ImportSkip, ReasonImportSkippedPinMismatch
		p.Message = msgSkippedPinMismatch(p.IP, cls.Name, p.HandPin)
		return p
	}
	if others := s.Sharers[p.IP]; len(others) > 0 {
		p.Step, p.Reason = ImportSkip, ReasonImportSkippedSharedIP
		p.Message = msgSkippedSharedIP(p.IP, cls.Name, others)
		return p
	}
	a := s.Ledger[p.IP]
	if a != nil && !(resuming && ImportedFor(a, svc, p.ClaimName)) {
		// In the ledger and not half-way through this import (the Service
		// is annotated before the address is created): conflict
		// detection's business. This also keeps an import the owner undid
		// (claim annotation removed) from running again.
		return ImportPlan{}
	}
	if c := s.Claim; c != nil {
		if !OwnImportClaim(c, svc, p) {
			p.Step, p.Reason = ImportSkip, ReasonImportSkippedClaimNameTaken
			p.Message = msgSkippedClaimNameTaken(p.IP, cls.Name, c.Namespace, c.Name)
			return p
		}
		if c.DeletionTimestamp != nil {
			return ImportPlan{}
		}
	}
	p.Step = ImportRun
	if resuming && a != nil && AssociatedWith(a, svc.Namespace, svc.Name) {
		p.Step = ImportDone
	}
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

// ImportedFor reports whether the address is the one imported from svc:
// pre-bound to the generated claim and recording the Service's uid.
func ImportedFor(a *iadv1alpha1.IPAddress, svc *corev1.Service, claimName string) bool {
	ref := a.Spec.ClaimRef
	return ref != nil && ref.Namespace == svc.Namespace && ref.Name == claimName &&
		a.Annotations[marks.AnnotationImportedServiceUID] == string(svc.UID)
}

// OwnImportClaim reports whether a claim of the generated name is this
// import's: labelled, recording the Service's uid, asking for the address.
func OwnImportClaim(c *iadv1alpha1.IPAddressClaim, svc *corev1.Service, p ImportPlan) bool {
	return c.Labels[marks.LabelImported] == "true" &&
		c.Annotations[marks.AnnotationImportedServiceUID] == string(svc.UID) &&
		c.Spec.AddressName == p.AddressName && c.Spec.ClassName == p.Class.Name
}

// ImportedClaim is the claim generated for the import. spec.addressName
// makes the core bind it to that address alone, and keeps the claim
// controller (which serves claims without it) from provisioning another.
func ImportedClaim(svc *corev1.Service, p ImportPlan) *iadv1alpha1.IPAddressClaim {
	c := &iadv1alpha1.IPAddressClaim{}
	c.Namespace, c.Name = svc.Namespace, p.ClaimName
	c.Labels = map[string]string{marks.LabelImported: "true"}
	c.Annotations = map[string]string{
		marks.AnnotationImportedService:    index.Key(svc.Namespace, svc.Name),
		marks.AnnotationImportedServiceUID: string(svc.UID),
	}
	c.Spec = iadv1alpha1.IPAddressClaimSpec{ClassName: p.Class.Name, Family: p.Family, AddressName: p.AddressName}
	return c
}

// ImportedAddress is the IPAddress of the import, pre-bound to the
// generated claim's uid, with the class's reclaim policy and the driver's
// teardown finalizer.
func ImportedAddress(svc *corev1.Service, claim *iadv1alpha1.IPAddressClaim, p ImportPlan) *iadv1alpha1.IPAddress {
	a := &iadv1alpha1.IPAddress{}
	a.Name = p.AddressName
	a.Labels = map[string]string{marks.LabelImported: "true"}
	a.Annotations = map[string]string{
		marks.AnnotationImportedService:    index.Key(svc.Namespace, svc.Name),
		marks.AnnotationImportedServiceUID: string(svc.UID),
	}
	a.Finalizers = []string{marks.Finalizer}
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

// ImportMarks are what the import makes of the Service's marks: the
// owner-pin record (a pin of the owner's stays the owner's), or the pin
// and key exactly as an attach leaves them (marks.Marks.AttachTo), and the grant
// label of the class. took says what pool request moved aside.
func ImportMarks(m marks.Marks, p ImportPlan, key string) (out marks.Marks, took string) {
	if p.HandPin != "" {
		took = m.KeepOwnerPin(p.HandPin)
		m.Grant = p.Class.Name
		return m, took
	}
	took = m.AttachTo(p.ClaimName, p.IP, key, p.Class.Name)
	return m, took
}

// ImportAnnotations are the Service's claim annotation and imported-into
// marker once imported, in a copy.
func ImportAnnotations(in map[string]string, p ImportPlan) map[string]string {
	return marks.Imported(in, p.ClaimName)
}
