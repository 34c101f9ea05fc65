package patch

import (
	"sync"
	"time"
)

// Written remembers, per object, the resourceVersion that a write of this
// process was locked to, until the cache shows another version of the
// object. A pass that reads the remembered version from the cache works
// from a view that misses that write: it would compute the same write
// again, and the lock would fail it with a conflict (a wasted request, and
// a retry). Such a pass can stop at once: the write's own watch event
// brings the object back as soon as the cache has it.
//
// It lives in memory only. A restarted controller remembers nothing and
// acts on its first reads, and the lock still guards every write, so
// nothing decides on it; it only saves the writes that would fail. A
// record older than writtenMaxAge is dropped (an object deleted before any
// pass read it again leaves one behind; a cache that lags that far is not
// waited for).
type Written struct {
	m         sync.Map // key -> writtenAt
	lastSweep time.Time
	mu        sync.Mutex // guards lastSweep
}

type writtenAt struct {
	basedOn string
	at      time.Time
}

// writtenMaxAge is how long a record is kept at most.
const writtenMaxAge = 30 * time.Second

// Wrote records that the object of key was written by a patch locked to
// resourceVersion basedOn (the version read before the write).
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

// Behind reports whether cached, the object's resourceVersion in the
// cache, is the version a recorded write was locked to: the cache has not
// shown that write yet. Once the cache shows another version, or the
// record is too old, the record is dropped.
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
