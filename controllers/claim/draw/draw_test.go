package draw

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestDrawLocksSerializeAClassOnly(t *testing.T) {
	var l Locks
	lock := func(class string) func() {
		c := l.Of(class)
		c.Decide.Lock()
		return c.Decide.Unlock
	}
	unlock := lock("public")

	other := make(chan struct{})
	go func() { lock("private")(); close(other) }()
	select {
	case <-other:
	case <-time.After(5 * time.Second):
		t.Fatal("another class's draw waited for this one")
	}

	same := make(chan struct{})
	go func() { lock("public")(); close(same) }()
	select {
	case <-same:
		t.Fatal("a second draw from the class did not wait for the first")
	case <-time.After(50 * time.Millisecond):
	}
	unlock()
	select {
	case <-same:
	case <-time.After(5 * time.Second):
		t.Fatal("the second draw never got the class")
	}
	assert.Len(t, l.m, 2, "one lock per class")
}
