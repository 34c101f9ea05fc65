package patch

import (
	"sync"
	"time"
)

// Written remembers, per object, the resourceVersion a write of this
// process was locked to, until the cache shows another. A pass reading that
// version would compute the same write and conflict, so it stops and waits
// for the write's watch event. Memory only, deciding nothing: the lock
// still guards every write. Records expire after writtenMaxAge.
type Written struct {
	m         sync.Map // key -> writtenAt
	lastSweep time.Time
	mu        sync.Mutex // guards lastSweep
}

type writtenAt struct {
	basedOn string
	at      time.Time
}

const writtenMaxAge = 30 * time.Second

// Wrote records that key was written by a patch locked to basedOn.
func (w *Written) Wrote(key, basedOn string) {
	now := time.Now()
	w.m.Store(key, writtenAt{basedOn: basedOn, at: now})
	w.mu.Lock()
	sweep := now.Sub(w.lastSweep) > writtenMaxAge
	if sweep {
		w.lastSweep = now
	}
	w.mu.Unlock()
	if sweep {
		w.m.Range(func(k, v any) bool {
			if now.Sub(v.(writtenAt).at) > writtenMaxAge {
				w.m.CompareAndDelete(k, v)
			}
			return true
		})
	}
}

// Behind reports whether cached, the object's version in the cache, is the
// one a recorded write was locked to; otherwise the record is dropped.
func (w *Written) Behind(key, cached string) bool {
	v, ok := w.m.Load(key)
	if !ok {
		return false
	}
	if r := v.(writtenAt); r.basedOn == cached && time.Since(r.at) <= writtenMaxAge {
		return true
	}
	w.m.CompareAndDelete(key, v)
	return false
}

// Forget drops the record of key (the object is gone).
func (w *Written) Forget(key string) { w.m.Delete(key) }
