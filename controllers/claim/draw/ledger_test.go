package draw

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/names"
)

// TestLedgerIndexes checks that the view a draw reads through the store's
// indexes is the one ViewOf derives from the whole ledger, for every class
// and family, and that it follows an entry's updates and deletion.
func TestLedgerIndexes(t *testing.T) {
	ref := &iadv1alpha1.ClaimReference{Namespace: "tenant", Name: "a", UID: "u"}
	addr := func(name, class, ip string, mut func(a *iadv1alpha1.IPAddress)) *iadv1alpha1.IPAddress {
		a := testAddress(name, ip, ref)
		a.Spec.ClassName = class
		if mut != nil {
			mut(&a)
		}
		return &a
	}
	available := func(a *iadv1alpha1.IPAddress) { a.Spec.ClaimRef, a.Status.Phase = nil, iadv1alpha1.AddressAvailable }
	held := func(a *iadv1alpha1.IPAddress) {
		a.Status.Conditions = []metav1.Condition{{Type: conditions.Held, Status: metav1.ConditionTrue}}
	}
	going := func(a *iadv1alpha1.IPAddress) { a.DeletionTimestamp = ptr.To(metav1.Now()) }
	lost := func(a *iadv1alpha1.IPAddress) { a.Status.Phase = iadv1alpha1.AddressLost }
	attached := func(a *iadv1alpha1.IPAddress) {
		a.Status.AssociatedTo = &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "tenant", Name: "web"}
	}
	entries := []*iadv1alpha1.IPAddress{
		addr("a1", "public", "192.0.2.1", held),
		addr("a2", "public", "192.0.2.2", nil),
		addr("a3", "public", "192.0.2.3", available),
		addr("a4", "public", "192.0.2.4", going),
		addr("a5", "public", "192.0.2.5", lost),
		addr("a6", "public", "192.0.2.6", attached),
		addr("a7", "public", "2001:db8::7", nil),
		addr("a8", "public", "2001:db8::8", available),
		addr("b1", "private", "198.51.100.1", nil),
		addr("b2", "private", "198.51.100.2", available),
		addr("bad", "public", "not-an-ip", nil),
	}
	store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, ledgerIndexers())
	for _, a := range entries {
		require.NoError(t, store.Add(a))
	}
	l := &Ledger{store: store, byIP: func(_ context.Context, ip string) ([]iadv1alpha1.IPAddress, error) {
		var out []iadv1alpha1.IPAddress
		for _, o := range store.List() {
			// As index.AddressByIP: the canonical form of what parses.
			a := o.(*iadv1alpha1.IPAddress)
			if got, err := names.ParseAddress(a.Spec.Address); err == nil && got.String() == ip {
				out = append(out, *a)
			}
		}
		return out, nil
	}}
	check := func(t *testing.T) {
		t.Helper()
		var all []iadv1alpha1.IPAddress
		for _, o := range store.List() {
			all = append(all, *o.(*iadv1alpha1.IPAddress))
		}
		for _, class := range []string{"public", "private", "none"} {
			for _, f := range []iadv1alpha1.IPFamily{iadv1alpha1.FamilyIPv4, iadv1alpha1.FamilyIPv6} {
				got, err := l.View(context.Background(), class, f)
				require.NoError(t, err)
				want := ViewOf(all, class, f)
				assert.Equal(t, want.Entries, got.Entries, "%s %s: entries", class, f)
				assert.Equal(t, namesOf(want.Available), namesOf(got.Available), "%s %s: available", class, f)
				assert.Equal(t, namesOf(want.Unheld), namesOf(got.Unheld), "%s %s: unheld", class, f)
				for _, ip := range []string{"192.0.2.1", "192.0.2.4", "2001:db8::8", "198.51.100.1", "not-an-ip", "192.0.2.99"} {
					assert.Equal(t, want.Records(ip), got.Records(ip), "%s %s: records %s", class, f, ip)
				}
			}
		}
	}
	t.Run("as added", func(t *testing.T) {
		check(t)
		v, err := l.View(context.Background(), "public", iadv1alpha1.FamilyIPv4)
		require.NoError(t, err)
		assert.Equal(t, 6, v.Entries, "the parsed IPv4 entries of public, the one being deleted included")
		assert.Equal(t, []string{"a3"}, namesOf(v.Available))
		assert.Equal(t, []string{"a2", "a3"}, namesOf(v.Unheld))
	})
	t.Run("an entry held, another bound, one gone", func(t *testing.T) {
		a2 := entries[1].DeepCopy()
		held(a2)
		require.NoError(t, store.Update(a2))
		a3 := entries[2].DeepCopy()
		a3.Spec.ClaimRef = ref
		require.NoError(t, store.Update(a3))
		require.NoError(t, store.Delete(entries[3]))
		check(t)
		v, err := l.View(context.Background(), "public", iadv1alpha1.FamilyIPv4)
		require.NoError(t, err)
		assert.Equal(t, 5, v.Entries)
		assert.Empty(t, v.Available)
		assert.Equal(t, []string{"a3"}, namesOf(v.Unheld))
	})
}

func namesOf(addrs []*iadv1alpha1.IPAddress) []string {
	out := []string{}
	for _, a := range addrs {
		out = append(out, a.Name)
	}
	slices.Sort(out)
	return out
}
