package index

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// countingIndexer fails, as the informer cache does, when a field is
// indexed twice.
type countingIndexer struct{ fields map[string]int }

func (c *countingIndexer) IndexField(_ context.Context, _ client.Object, field string, _ client.IndexerFunc) error {
	c.fields[field]++
	if c.fields[field] > 1 {
		return fmt.Errorf("indexer conflict: %s", field)
	}
	return nil
}

type fakeManager struct {
	ctrl.Manager
	indexer client.FieldIndexer
}

func (m fakeManager) GetFieldIndexer() client.FieldIndexer { return m.indexer }

func TestRegisterIsIdempotentPerManager(t *testing.T) {
	ctx := context.Background()
	one, two := &countingIndexer{fields: map[string]int{}}, &countingIndexer{fields: map[string]int{}}
	require.NoError(t, Register(ctx, fakeManager{indexer: one}, AddressByClaim, AddressByIP))
	require.NoError(t, Register(ctx, fakeManager{indexer: one}, AddressByClaim, AddressByClass), "a second controller of the same manager")
	require.NoError(t, Register(ctx, fakeManager{indexer: two}, AddressByClaim), "another manager")
	assert.Equal(t, map[string]int{AddressByClaim: 1, AddressByIP: 1, AddressByClass: 1}, one.fields)
	assert.Equal(t, map[string]int{AddressByClaim: 1}, two.fields)
}
