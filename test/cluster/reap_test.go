package cluster

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParentOf(t *testing.T) {
	assert.Equal(t, os.Getppid(), parentOf(os.Getpid()))
	assert.Equal(t, 0, parentOf(-1))
}
