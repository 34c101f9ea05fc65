package marks

import (
	"testing"

	"github.com/stretchr/testify/assert"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
)

func TestAttachGrant(t *testing.T) {
	a := &iadv1alpha1.IPAddress{}
	_, ok := AttachingService(a)
	assert.False(t, ok)
	GrantAttach(a, "shop", "web")
	assert.Equal(t, "shop/web", Attaching(a))
	got, ok := AttachingService(a)
	assert.True(t, ok)
	assert.Equal(t, "shop", got.Namespace)
	assert.Equal(t, "web", got.Name)
}
