package claim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
)

func TestLedgerVerdict(t *testing.T) {
	c := testClaim(iadv1alpha1.FamilyIPv4)
	mine := testAddress("ip-192-0-2-1", "192.0.2.1", &iadv1alpha1.ClaimReference{Namespace: "tenant", Name: "web", UID: string(testUID)})
	mineNoUID := testAddress("ip-192-0-2-1", "192.0.2.1", &iadv1alpha1.ClaimReference{Namespace: "tenant", Name: "web"})
	other := testAddress("ip-192-0-2-1", "192.0.2.1", &iadv1alpha1.ClaimReference{Namespace: "tenant", Name: "db", UID: "x"})
	stale := testAddress("ip-192-0-2-1", "192.0.2.1", &iadv1alpha1.ClaimReference{Namespace: "tenant", Name: "web", UID: "an-earlier-claim"})
	unbound := testAddress("static-one", "192.0.2.1", nil)
	going := other
	going.DeletionTimestamp = ptr.To(metav1.Now())

	tests := []struct {
		name    string
		entries []iadv1alpha1.IPAddress
		want    ledgerAnswer
		entry   string
	}{
		{"no entry: record", nil, ledgerFree, ""},
		{"entry bound to this claim: finish recording", []iadv1alpha1.IPAddress{mine}, ledgerOurs, "ip-192-0-2-1"},
		{"entry bound to this claim, uid not filled in yet", []iadv1alpha1.IPAddress{mineNoUID}, ledgerOurs, "ip-192-0-2-1"},
		{"entry of another claim: give back", []iadv1alpha1.IPAddress{other}, ledgerTaken, "ip-192-0-2-1"},
		{"entry of an earlier claim of the same name: give back", []iadv1alpha1.IPAddress{stale}, ledgerTaken, "ip-192-0-2-1"},
		{"unbound entry under another name: give back", []iadv1alpha1.IPAddress{unbound}, ledgerTaken, "static-one"},
		{"entry being deleted: wait", []iadv1alpha1.IPAddress{going}, ledgerGoing, "ip-192-0-2-1"},
		{"a live entry beats one being deleted", []iadv1alpha1.IPAddress{going, unbound}, ledgerTaken, "static-one"},
		{"ours beats the others", []iadv1alpha1.IPAddress{unbound, mine}, ledgerOurs, "ip-192-0-2-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, entry := ledgerVerdict(tt.entries, c)
			assert.Equal(t, tt.want, got)
			if tt.entry == "" {
				assert.Nil(t, entry)
			} else if assert.NotNil(t, entry) {
				assert.Equal(t, tt.entry, entry.Name)
			}
		})
	}
}

func TestUnsettledAddress(t *testing.T) {
	ref := &iadv1alpha1.ClaimReference{Namespace: "tenant", Name: "a", UID: "u"}
	with := func(mut func(a *iadv1alpha1.IPAddress)) iadv1alpha1.IPAddress {
		a := testAddress("ip-192-0-2-1", "192.0.2.1", ref)
		mut(&a)
		return a
	}
	held := with(func(a *iadv1alpha1.IPAddress) {
		a.Status.Conditions = []metav1.Condition{{Type: conditions.Held, Status: metav1.ConditionTrue, Reason: conditions.ReasonHeldByPlaceholder}}
	})
	waiting := with(func(a *iadv1alpha1.IPAddress) {
		a.Status.Conditions = []metav1.Condition{{Type: conditions.Held, Status: metav1.ConditionUnknown, Reason: conditions.ReasonWaitingForMetalLB}}
	})
	attached := with(func(a *iadv1alpha1.IPAddress) {
		a.Status.AssociatedTo = &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "tenant", Name: "web"}
	})
	lost := with(func(a *iadv1alpha1.IPAddress) { a.Status.Phase = iadv1alpha1.AddressLost })
	conflict := with(func(a *iadv1alpha1.IPAddress) { a.Status.Phase = iadv1alpha1.AddressConflict })
	going := with(func(a *iadv1alpha1.IPAddress) { a.DeletionTimestamp = ptr.To(metav1.Now()) })
	v6 := testAddress("ip6-x", "2001:db8::1", ref)
	never := func(*iadv1alpha1.IPAddress, string) bool { return false }
	always := func(*iadv1alpha1.IPAddress, string) bool { return true }

	tests := []struct {
		name  string
		addrs []iadv1alpha1.IPAddress
		held  func(*iadv1alpha1.IPAddress, string) bool
		want  string
	}{
		{"no addresses", nil, never, ""},
		{"held", []iadv1alpha1.IPAddress{held}, never, ""},
		{"attached", []iadv1alpha1.IPAddress{attached}, never, ""},
		{"lost: outside the pool, MetalLB cannot hand it out", []iadv1alpha1.IPAddress{lost}, never, ""},
		{"conflict: someone holds it", []iadv1alpha1.IPAddress{conflict}, never, ""},
		{"being deleted", []iadv1alpha1.IPAddress{going}, never, ""},
		{"other family", []iadv1alpha1.IPAddress{v6}, never, ""},
		{"waiting for its hold: unsettled", []iadv1alpha1.IPAddress{held, waiting}, never, "ip-192-0-2-1"},
		{"waiting, but a placeholder of it already holds it", []iadv1alpha1.IPAddress{waiting}, always, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := unsettledAddress(tt.addrs, iadv1alpha1.FamilyIPv4, tt.held)
			if tt.want == "" {
				assert.Nil(t, got)
			} else if assert.NotNil(t, got) {
				assert.Equal(t, tt.want, got.Name)
			}
		})
	}
}

func TestDecideDraw(t *testing.T) {
	class := &iadv1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "public"},
		Spec: iadv1alpha1.IPAddressClassSpec{Parameters: &apiextensionsv1.JSON{Raw: []byte(`{"addresses":["192.0.2.0/30"]}`)}}}
	ref := &iadv1alpha1.ClaimReference{Namespace: "tenant", Name: "a", UID: "u"}
	available := testAddress("ip-192-0-2-1", "192.0.2.1", nil)
	available.Status.Phase = iadv1alpha1.AddressAvailable
	bound := testAddress("ip-192-0-2-2", "192.0.2.2", ref)
	held := func(*iadv1alpha1.IPAddress, string) bool { return true }
	unheld := func(*iadv1alpha1.IPAddress, string) bool { return false }
	tests := []struct {
		name            string
		addrs           []iadv1alpha1.IPAddress
		drawn, inflight int
		held            func(*iadv1alpha1.IPAddress, string) bool
		want            drawDecision
	}{
		{"an empty class: draw", nil, 0, 0, unheld, drawDecision{verdict: drawNow}},
		{"an Available address: left to the core", []iadv1alpha1.IPAddress{bound, available}, 0, 0, held,
			drawDecision{verdict: drawLeftToCore, available: "ip-192-0-2-1"}},
		{"the ledger and the draws fill the ranges", []iadv1alpha1.IPAddress{bound}, 3, 0, held,
			drawDecision{verdict: drawClassFull, used: 4, size: 4}},
		{"the ledger and the draws in flight fill the ranges", []iadv1alpha1.IPAddress{bound}, 0, 3, held,
			drawDecision{verdict: drawClassFull, used: 4, size: 4}},
		{"cached draws and draws in flight add up to the ranges", []iadv1alpha1.IPAddress{bound}, 1, 2, held,
			drawDecision{verdict: drawClassFull, used: 4, size: 4}},
		{"an empty class with every address in flight", nil, 0, 4, unheld,
			drawDecision{verdict: drawClassFull, used: 4, size: 4}},
		{"room for one more beside the draws in flight: draw", []iadv1alpha1.IPAddress{bound}, 1, 1, held,
			drawDecision{verdict: drawNow}},
		{"an address of the ledger is unheld", []iadv1alpha1.IPAddress{bound}, 1, 0, unheld,
			drawDecision{verdict: drawLedgerUnsettled, unsettled: &bound}},
		{"every address is held: draw", []iadv1alpha1.IPAddress{bound}, 2, 0, held, drawDecision{verdict: drawNow}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decideDraw(class, iadv1alpha1.FamilyIPv4, tt.addrs, tt.drawn, tt.inflight, tt.held)
			if tt.want.unsettled != nil {
				require.NotNil(t, got.unsettled)
				assert.Equal(t, tt.want.unsettled.Name, got.unsettled.Name)
				got.unsettled, tt.want.unsettled = nil, nil
			}
			assert.Equal(t, tt.want, got)
		})
	}
}
