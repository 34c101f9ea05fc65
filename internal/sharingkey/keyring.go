package sharingkey

import (
	"sync"
	"sync/atomic"

	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Keyring holds the Keys a controller derives sharing keys with now. The
// sharing-key watch (Watch) replaces them when the secret is
// rotated; each controller that writes keys re-enqueues what carries one
// (Rotations), so every pass after a rotation derives with the new secret.
// The nil Keyring holds the zero Keys (no secret).
type Keyring struct {
	cur atomic.Pointer[Keys]
	// before are the Keys cur replaced (nil before any rotation).
	before atomic.Pointer[Keys]

	mu   sync.Mutex
	subs []chan event.GenericEvent
}

// New returns a Keyring holding keys.
func New(keys Keys) *Keyring {
	r := &Keyring{}
	r.cur.Store(&keys)
	return r
}

// Now returns the Keys to derive with; a pass reads them once.
func (r *Keyring) Now() Keys {
	if r == nil {
		return Keys{}
	}
	if k := r.cur.Load(); k != nil {
		return *k
	}
	return Keys{}
}

// Before returns the Keys the last rotation replaced, and whether there
// was one: what carries a key derived with them is the driver's, not
// another binding's or a hand's, and is re-stamped rather than stripped.
func (r *Keyring) Before() (Keys, bool) {
	if r == nil {
		return Keys{}, false
	}
	if k := r.before.Load(); k != nil {
		return *k, true
	}
	return Keys{}, false
}

// Set replaces the Keys and, when they changed, tells every Rotations
// source; it reports whether they changed.
func (r *Keyring) Set(keys Keys) bool {
	old := r.cur.Swap(&keys)
	if old != nil && *old == keys {
		return false
	}
	if old != nil {
		r.before.Store(old)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ch := range r.subs {
		select {
		case ch <- event.GenericEvent{}:
		default: // one pending rotation stands for any number
		}
	}
	return true
}

// Rotations is a source that fires h once after each rotation (a
// GenericEvent with no object): h maps it to everything the controller
// must re-stamp. A nil Keyring never fires.
func (r *Keyring) Rotations(h handler.EventHandler) source.Source {
	ch := make(chan event.GenericEvent, 1)
	if r != nil {
		r.mu.Lock()
		r.subs = append(r.subs, ch)
		r.mu.Unlock()
	}
	return source.Channel(ch, h)
}
