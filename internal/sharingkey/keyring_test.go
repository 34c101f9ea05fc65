package sharingkey

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

func TestKeyring(t *testing.T) {
	var none *Keyring
	assert.Equal(t, Keys{}, none.Now(), "the nil Keyring holds no secret")
	_, ok := none.Before()
	assert.False(t, ok)

	first, second := NewKeys([]byte("first-secret-of-16+")), NewKeys([]byte("second-secret-of-16+"))
	r := New(first)
	assert.Equal(t, first, r.Now())
	_, ok = r.Before()
	assert.False(t, ok, "no rotation yet")

	ch := make(chan event.GenericEvent, 1)
	r.subs = append(r.subs, ch)
	assert.False(t, r.Set(first), "the same secret is no rotation")
	assert.Len(t, ch, 0)

	assert.True(t, r.Set(second))
	assert.Equal(t, second, r.Now())
	before, ok := r.Before()
	assert.True(t, ok)
	assert.Equal(t, first, before, "the keys the rotation replaced")
	assert.Len(t, ch, 1, "a rotation tells each source")

	assert.True(t, r.Set(first), "rotated back")
	assert.Len(t, ch, 1, "one pending rotation stands for any number")
}
