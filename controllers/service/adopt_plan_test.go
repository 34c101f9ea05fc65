package service

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
)

func adoptClass(t *testing.T, name, params string) AdoptClass {
	t.Helper()
	p, err := classparams.ParseParameters(&apiextensionsv1.JSON{Raw: []byte(params)})
	require.NoError(t, err)
	return AdoptClass{Name: name, Reclaim: iadv1alpha1.ReclaimDelete, Params: p}
}

// plain is a LoadBalancer Service MetalLB gave ips.
func plain(ns, name string, ips ...string) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), Annotations: map[string]string{}},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer},
	}
	for _, ip := range ips {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
	return s
}

func with(s *corev1.Service, kv ...string) *corev1.Service {
	for i := 0; i+1 < len(kv); i += 2 {
		s.Annotations[kv[i]] = kv[i+1]
	}
	return s
}

func TestImportedClaimName(t *testing.T) {
	a := names.ImportedClaimName("web", "uid-1")
	assert.Regexp(t, `^web-imported-[0-9a-f]{8}$`, a)
	assert.Equal(t, a, names.ImportedClaimName("web", "uid-1"), "deterministic")
	assert.NotEqual(t, a, names.ImportedClaimName("web", "uid-2"), "a recreated Service gets another claim")
	long := names.ImportedClaimName("a-very-long-service-name-that-goes-on-and-on-and-on-and-on-x", "u")
	assert.LessOrEqual(t, len(long), 63)
	assert.Regexp(t, `^a-very-long.*-imported-[0-9a-f]{8}$`, long)
}

func TestPlanImport(t *testing.T) {
	gold := adoptClass(t, "gold", `{"addresses": ["192.0.2.0/28", "2001:db8::/124"], "adoptExisting": true}`)
	classes := []AdoptClass{gold}
	claimName := names.ImportedClaimName("web", "uid-web")
	ownClaim := func() *iadv1alpha1.IPAddressClaim {
		return ImportedClaim(plain("shop", "web"), ImportPlan{Class: &gold, ClaimName: claimName, AddressName: "ip-192-0-2-5", Family: iadv1alpha1.FamilyIPv4})
	}
	ledgerFor := func(svc string, associated bool) map[string]*iadv1alpha1.IPAddress {
		s := plain("shop", svc)
		c := ownClaim()
		a := ImportedAddress(s, c, ImportPlan{Class: &gold, IP: "192.0.2.5", AddressName: "ip-192-0-2-5", ClaimName: claimName})
		if associated {
			a.Status.AssociatedTo = &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "shop", Name: "web"}
		}
		return map[string]*iadv1alpha1.IPAddress{"192.0.2.5": a}
	}
	resumed := func() *corev1.Service {
		return with(plain("shop", "web", "192.0.2.5"),
			iadv1alpha1.ServiceClaimAnnotation, claimName, marks.KeyImportedInto, claimName,
			marks.KeyPin, "192.0.2.5", marks.KeyPinnedBy, claimName)
	}

	tests := []struct {
		name   string
		sit    ImportSituation
		step   ImportStep
		reason string
		parts  []string
	}{
		{name: "auto-assigned address in range", step: ImportRun,
			sit: ImportSituation{Service: plain("shop", "web", "192.0.2.5"), Classes: classes}},
		{name: "IPv6 address in range", step: ImportRun,
			sit: ImportSituation{Service: plain("shop", "web", "2001:db8::3"), Classes: classes}},
		{name: "pinned by hand to the address it holds", step: ImportRun,
			sit: ImportSituation{Service: with(plain("shop", "web", "192.0.2.5"), marks.KeyPin, "192.0.2.5"), Classes: classes}},
		{name: "no class imports", step: ImportNone,
			sit: ImportSituation{Service: plain("shop", "web", "192.0.2.5")}},
		{name: "outside every importing range", step: ImportNone,
			sit: ImportSituation{Service: plain("shop", "web", "198.51.100.5"), Classes: classes}},
		{name: "nothing assigned", step: ImportNone,
			sit: ImportSituation{Service: plain("shop", "web"), Classes: classes}},
		{name: "not a LoadBalancer", step: ImportNone,
			sit: ImportSituation{Service: func() *corev1.Service {
				s := plain("shop", "web", "192.0.2.5")
				s.Spec.Type = corev1.ServiceTypeClusterIP
				return s
			}(), Classes: classes}},
		{name: "being deleted", step: ImportNone,
			sit: ImportSituation{Service: func() *corev1.Service {
				s := plain("shop", "web", "192.0.2.5")
				s.DeletionTimestamp = ptr.To(metav1.Now())
				return s
			}(), Classes: classes}},
		{name: "a placeholder", step: ImportNone,
			sit: ImportSituation{Service: func() *corev1.Service {
				s := plain("iad-system", "hold-ip-192-0-2-5", "192.0.2.5")
				s.Labels = map[string]string{marks.LabelPlaceholder: names.PlaceholderHold}
				return s
			}(), PlaceholderNamespace: "iad-system", Classes: classes}},
		{name: "attached through a tenant's claim", step: ImportNone,
			sit: ImportSituation{Service: with(plain("shop", "web", "192.0.2.5"), iadv1alpha1.ServiceClaimAnnotation, "mine"), Classes: classes}},
		{name: "associated with an address", step: ImportNone,
			sit: ImportSituation{Service: plain("shop", "web", "192.0.2.5"), Classes: classes, Associated: 1}},
		{name: "the address is in the ledger for something else", step: ImportNone,
			sit: ImportSituation{Service: plain("shop", "web", "192.0.2.5"), Classes: classes,
				Ledger: map[string]*iadv1alpha1.IPAddress{"192.0.2.5": {Spec: iadv1alpha1.IPAddressSpec{
					ClaimRef: &iadv1alpha1.ClaimReference{Namespace: "shop", Name: "other"}}}}}},
		{name: "two addresses, one in range", step: ImportSkip, reason: ReasonImportSkippedPartlyInRange,
			parts: []string{"192.0.2.5", "IPAddressClass gold", "2001:db9::1", "which does not"},
			sit:   ImportSituation{Service: plain("shop", "web", "192.0.2.5", "2001:db9::1"), Classes: classes}},
		{name: "two addresses, both in range", step: ImportSkip, reason: ReasonImportSkippedDualStack,
			parts: []string{"192.0.2.5,2001:db8::3", "dual-stack"},
			sit:   ImportSituation{Service: plain("shop", "web", "192.0.2.5", "2001:db8::3"), Classes: classes}},
		{name: "shared through a sharing key", step: ImportSkip, reason: ReasonImportSkippedSharedIP,
			parts: []string{"192.0.2.5", "Service shop/api, other/db"},
			sit: ImportSituation{Service: plain("shop", "web", "192.0.2.5"), Classes: classes,
				Sharers: map[string][]string{"192.0.2.5": {"shop/api", "other/db"}}}},
		{name: "a tenant's claim has the generated name", step: ImportSkip, reason: ReasonImportSkippedClaimNameTaken,
			parts: []string{"192.0.2.5", "shop/" + claimName, "did not generate"},
			sit: ImportSituation{Service: plain("shop", "web", "192.0.2.5"), Classes: classes,
				Claim: &iadv1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: claimName}}}},
		{name: "a claim labelled as imported but for another address", step: ImportSkip, reason: ReasonImportSkippedClaimNameTaken,
			sit: ImportSituation{Service: plain("shop", "web", "192.0.2.5"), Classes: classes, Claim: func() *iadv1alpha1.IPAddressClaim {
				c := ownClaim()
				c.Spec.AddressName = "ip-192-0-2-6"
				return c
			}()}},
		{name: "hand pin names another address", step: ImportSkip, reason: ReasonImportSkippedPinMismatch,
			parts: []string{"holds 192.0.2.5", "asks for 192.0.2.9"},
			sit:   ImportSituation{Service: with(plain("shop", "web", "192.0.2.5"), marks.KeyPin, "192.0.2.9"), Classes: classes}},
		{name: "resume: the generated claim exists", step: ImportRun,
			sit: ImportSituation{Service: plain("shop", "web", "192.0.2.5"), Classes: classes, Claim: ownClaim()}},
		{name: "resume: Service annotated, address created", step: ImportRun,
			sit: ImportSituation{Service: resumed(), Classes: classes, Claim: ownClaim(), Ledger: ledgerFor("web", false)}},
		{name: "done: associated", step: ImportDone,
			sit: ImportSituation{Service: resumed(), Classes: classes, Claim: ownClaim(), Ledger: ledgerFor("web", true), Associated: 1}},
		{name: "the owner took the claim annotation off: not resumed", step: ImportNone,
			sit: ImportSituation{Service: with(plain("shop", "web", "192.0.2.5"), marks.KeyImportedInto, claimName, marks.KeyPin, "192.0.2.5"),
				Classes: classes, Claim: ownClaim(), Ledger: ledgerFor("web", false)}},
		{name: "the generated claim is being deleted", step: ImportNone,
			sit: ImportSituation{Service: resumed(), Classes: classes, Claim: func() *iadv1alpha1.IPAddressClaim {
				c := ownClaim()
				c.DeletionTimestamp = ptr.To(metav1.Now())
				return c
			}(), Ledger: ledgerFor("web", false)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := PlanImport(tt.sit)
			assert.Equal(t, tt.step, p.Step)
			assert.Equal(t, tt.reason, p.Reason)
			for _, part := range tt.parts {
				assert.Contains(t, p.Message, part)
			}
			if p.Step == ImportRun {
				assert.Equal(t, names.ImportedClaimName(tt.sit.Service.Name, tt.sit.Service.UID), p.ClaimName)
				assert.Equal(t, "gold", p.Class.Name)
			}
		})
	}
}

// imported is in as the import leaves it (ImportAnnotations, ImportMarks).
func imported(in map[string]string, p ImportPlan, key string) map[string]string {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: in}}
	m, _ := ImportMarks(marks.Of(svc), p, key)
	svc.Annotations = ImportAnnotations(in, p)
	m.Apply(svc)
	return svc.Annotations
}

func TestImportAnnotations(t *testing.T) {
	gold := adoptClass(t, "gold", `{"addresses": ["192.0.2.0/28"], "adoptExisting": true}`)
	auto := ImportPlan{Class: &gold, IP: "192.0.2.5", ClaimName: "web-imported-1"}
	in := map[string]string{"team": "a"}
	assert.Equal(t, map[string]string{
		"team":                             "a",
		iadv1alpha1.ServiceClaimAnnotation: "web-imported-1",
		marks.KeyImportedInto:              "web-imported-1",
		marks.KeyPin:                       "192.0.2.5",
		marks.KeyPinnedBy:                  "web-imported-1",
		marks.KeySharing:                   "key",
		marks.KeySharedBy:                  "web-imported-1",
	}, imported(in, auto, "key"), "auto-assigned: pinned like an attach, with the claim's key")
	assert.Equal(t, map[string]string{"team": "a"}, in, "input untouched")

	noKey := imported(in, auto, "")
	assert.NotContains(t, noKey, marks.KeySharing)
	assert.Equal(t, "192.0.2.5", noKey[marks.KeyPin])

	hand := auto
	hand.HandPin = "192.0.2.5"
	handIn := map[string]string{marks.KeyPin: "192.0.2.5"}
	got := imported(handIn, hand, "")
	assert.Equal(t, map[string]string{
		marks.KeyPin:                       "192.0.2.5",
		iadv1alpha1.ServiceClaimAnnotation: "web-imported-1",
		marks.KeyImportedInto:              "web-imported-1",
		marks.KeyOwnerPin:                  "192.0.2.5",
	}, got, "a hand pin stays the owner's: no pinned-by marker")
	assert.Equal(t, "192.0.2.5", marks.Of(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: got}}).HandPin(), "still a hand pin after the import")
}

func TestImportedObjects(t *testing.T) {
	gold := adoptClass(t, "gold", `{"addresses": ["192.0.2.0/28"], "adoptExisting": true}`)
	svc := plain("shop", "web", "192.0.2.5")
	p := PlanImport(ImportSituation{Service: svc, Classes: []AdoptClass{gold}})
	require.Equal(t, ImportRun, p.Step)
	c := ImportedClaim(svc, p)
	assert.Equal(t, "shop", c.Namespace)
	assert.Equal(t, p.ClaimName, c.Name)
	assert.Equal(t, "true", c.Labels[marks.LabelImported])
	assert.Equal(t, "shop/web", c.Annotations[marks.AnnotationImportedService])
	assert.Equal(t, "uid-web", c.Annotations[marks.AnnotationImportedServiceUID])
	assert.Equal(t, iadv1alpha1.IPAddressClaimSpec{ClassName: "gold", Family: iadv1alpha1.FamilyIPv4, AddressName: "ip-192-0-2-5"}, c.Spec)
	assert.True(t, OwnImportClaim(c, svc, p))

	c.UID = "claim-uid"
	a := ImportedAddress(svc, c, p)
	assert.Equal(t, "ip-192-0-2-5", a.Name)
	assert.Equal(t, []string{marks.Finalizer}, a.Finalizers)
	assert.Equal(t, iadv1alpha1.IPAddressSpec{
		Address: "192.0.2.5", ClassName: "gold", ReclaimPolicy: iadv1alpha1.ReclaimDelete,
		ClaimRef: &iadv1alpha1.ClaimReference{Namespace: "shop", Name: p.ClaimName, UID: "claim-uid"},
		Source:   iadv1alpha1.IPAddressSource{FromClass: &iadv1alpha1.FromClassSource{}},
	}, a.Spec)
	assert.True(t, ImportedFor(a, svc, p.ClaimName))
	assert.False(t, ImportedFor(a, plain("shop", "other"), p.ClaimName))
}
