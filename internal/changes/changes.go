// Package changes remembers the last thing a controller reported about each
// object, to report once per change instead of every pass. It decides
// nothing: a restart repeats each current report once.
package changes

import "sync"

// Memo maps an object's key to the last value reported; the zero value is
// ready and safe for concurrent use.
type Memo struct {
	mu sync.Mutex
	m  map[string]string
}

// Changed records value for key and reports whether it differs from the
// previous one. Recording "" makes the next non-empty report a change again.
func (m *Memo) Changed(key, value string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[string]string{}
	}
	old := m.m[key]
	if value == "" {
		delete(m.m, key)
	} else {
		m.m[key] = value
	}
	return old != value
}

// Forget drops what was recorded for key.
func (m *Memo) Forget(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, key)
}

// ForgetPrefix drops what was recorded for every key starting with prefix.
func (m *Memo) ForgetPrefix(prefix string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.m {
		if len(k) >= len(prefix) && k[:len(prefix)] == prefix {
			delete(m.m, k)
		}
	}
}
