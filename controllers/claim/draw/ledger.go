package draw

import (
	"context"
	"fmt"
	"slices"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/index"
)

// Ledger reads the class ledgers from the IPAddress informer's store
// through indexes of its own (ledger_plan.go). A draw asks for a count and
// the few entries that may decide it, where a list of the class's entries
// would copy every one of them, thousands in a large class, on every draw.
// The store is read as the cache's List reads it: in step with the
// informer, without copies; nothing read from it may be changed.
type Ledger struct {
	store toolscache.Indexer
	// byIP lists the entries recording an address (index.AddressByIP),
	// without copies.
	byIP func(ctx context.Context, ip string) ([]iadv1alpha1.IPAddress, error)
}

// NewLedger registers the ledger's indexes on the IPAddress informer of
// c, which must not have started yet, and returns the reader of its store.
func NewLedger(ctx context.Context, c cache.Cache) (*Ledger, error) {
	inf, err := c.GetInformer(ctx, &iadv1alpha1.IPAddress{})
	if err != nil {
		return nil, err
	}
	shared, ok := inf.(toolscache.SharedIndexInformer)
	if !ok {
		return nil, fmt.Errorf("the IPAddress informer (%T) has no indexed store", inf)
	}
	// Another controller of the same manager (tests) may have added them.
	if err := shared.AddIndexers(ledgerIndexers()); err != nil && !index.Registered(err) {
		return nil, err
	}
	byIP := func(ctx context.Context, ip string) ([]iadv1alpha1.IPAddress, error) {
		var l iadv1alpha1.IPAddressList
		err := c.List(ctx, &l, client.MatchingFields{index.AddressByIP: ip}, client.UnsafeDisableDeepCopy)
		return l.Items, err
	}
	return &Ledger{store: shared.GetIndexer(), byIP: byIP}, nil
}

// ledgerIndexers are the ledger's indexes as a store takes them.
func ledgerIndexers() toolscache.Indexers {
	indexers := toolscache.Indexers{}
	for name, keys := range ledgerIndexes() {
		indexers[name] = func(o any) ([]string, error) {
			a, ok := o.(*iadv1alpha1.IPAddress)
			if !ok {
				return nil, nil
			}
			return keys(a), nil
		}
	}
	return indexers
}

// View reads class's ledger in family f.
func (l *Ledger) View(ctx context.Context, class string, f iadv1alpha1.IPFamily) (LedgerView, error) {
	key := ledgerKey(class, f)
	all, err := l.store.ByIndex(ledgerEntries, key)
	if err != nil {
		return LedgerView{}, err
	}
	v := LedgerView{Entries: len(all)}
	if v.Available, err = l.entries(ledgerAvailable, key); err != nil {
		return LedgerView{}, err
	}
	if v.Unheld, err = l.entries(ledgerUnheld, key); err != nil {
		return LedgerView{}, err
	}
	v.Records = func(ip string) bool {
		// An error (never seen: the index is registered) counts the
		// address unrecorded, which leaves less room, not more.
		got, err := l.byIP(ctx, ip)
		return err == nil && slices.ContainsFunc(got, func(a iadv1alpha1.IPAddress) bool { return a.Spec.ClassName == class })
	}
	return v, nil
}

// entries are the cached IPAddresses under key in the index named.
func (l *Ledger) entries(index, key string) ([]*iadv1alpha1.IPAddress, error) {
	objs, err := l.store.ByIndex(index, key)
	if err != nil {
		return nil, err
	}
	out := make([]*iadv1alpha1.IPAddress, 0, len(objs))
	for _, o := range objs {
		if a, ok := o.(*iadv1alpha1.IPAddress); ok {
			out = append(out, a)
		}
	}
	return out, nil
}
