package service

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/types"
)

func TestImportOutcomes(t *testing.T) {
	var o importOutcomes
	key := types.NamespacedName{Namespace: "tenant", Name: "web"}
	assert.True(t, o.changed(key, "u1", ReasonImportSkippedSharedIP))
	assert.False(t, o.changed(key, "u1", ReasonImportSkippedSharedIP), "once per reason")
	assert.True(t, o.changed(key, "u2", ReasonImportSkippedSharedIP), "a new Service of the same name")
	assert.True(t, o.changed(key, "u2", ReasonImportSkippedDualStack))
	o.forget(key)
	assert.True(t, o.changed(key, "u2", ReasonImportSkippedDualStack), "forgotten")
}
