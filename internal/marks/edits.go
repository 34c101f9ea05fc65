package marks

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/cozystack/metallb-iad/internal/names"
)

// The edits the driver makes to a Service's marks. Each changes only the
// Marks; Apply writes them.

// pinFor pins the Service to pin for claim, marked as the driver's: the
// owner's pool request moves aside (takeOverPool) and, with a key, the
// sharing key goes on, marked; without one the driver's key is withdrawn.
func (m *Marks) pinFor(claim, pin, key string) {
	m.takeOverPool()
	m.Pin, m.PinnedBy = pin, claim
	if key != "" {
		m.Sharing, m.SharedBy = key, claim
	} else {
		m.withdrawKey()
	}
}

// AttachTo marks the Service attached to claim's addresses: pinned for
// claim (pinFor) unless it carries a pin of its own (HandPin), which stays
// the owner's; either way the owner's pool request moves aside (took says
// what moved) and, with class, the grant label goes on: the class pool
// admits only granted Services, hand-pinned ones too.
func (m *Marks) AttachTo(claim, pin, key, class string) (took string) {
	hand := m.HandPin()
	took = m.takeOverPool()
	if hand == "" {
		m.pinFor(claim, pin, key)
	}
	if class != "" {
		m.Grant = class
	}
	return took
}

// Attachment is what Attach changed on a Service.
type Attachment struct {
	// Changed: anything is to be written; Pinned: an annotation (the pin,
	// key or markers), not the grant label alone.
	Changed, Pinned bool
	// Took says which pool request moved aside (takeOverPool).
	Took string
	// Hand: the Service keeps a pin of its own.
	Hand bool
}

// Attach applies to svc, whose marks m are, the attachment to claim
// (AttachTo) and says what it changed: the attach's one write of marks.
func (m Marks) Attach(svc *corev1.Service, claim, pin, key, class string) Attachment {
	a := Attachment{Hand: m.HandPin() != ""}
	a.Took = m.AttachTo(claim, pin, key, class)
	a.Changed, a.Pinned = m.Changed(), m.annotationsChanged()
	m.Apply(svc)
	return a
}

// KeepOwnerPin records pin, the owner's own (an imported Service), as the
// owner's: the driver never withdraws it. The pool request moves aside;
// took says what moved (takeOverPool).
func (m *Marks) KeepOwnerPin(pin string) (took string) {
	took = m.takeOverPool()
	m.OwnerPin = pin
	return took
}

// takeOverPool moves the owner's pool requests aside (the first kept in
// OwnerPool) and says what it moved, as "key: value" and where the value
// is kept: beside the pin, a pool that may not hold the address makes
// MetalLB refuse it.
func (m *Marks) takeOverPool() string {
	var moved []string
	for _, p := range []struct {
		key string
		v   *string
	}{{KeyPool, &m.Pool}, {KeyLegacyPool, &m.LegacyPool}} {
		if *p.v == "" {
			continue
		}
		if m.OwnerPool == "" {
			m.OwnerPool = *p.v
		}
		moved = append(moved, p.key+": "+*p.v)
		*p.v = ""
	}
	if len(moved) == 0 {
		return ""
	}
	return strings.Join(moved, ", ") + " (the value is kept in annotation " + KeyOwnerPool + ")"
}

// withdrawKey removes the sharing key and its marker, if the driver wrote the key.
func (m *Marks) withdrawKey() {
	if m.SharedBy != "" {
		m.Sharing, m.SharedBy = "", ""
	}
}

// Release is step 1 of the release sequence (release.go): the release pin
// replaces the pin and the driver's key goes. With release empty (a
// grant-only pool, whose grant the same write withdraws) the pin goes
// instead: the selector, not an impossible pin, makes MetalLB let go.
func (m *Marks) Release(release string) {
	m.Pin = release
	m.withdrawKey()
}

// Withdraw is step 2: the pin, its marker and the driver's key go. Only
// for a pin the driver wrote.
func (m *Marks) Withdraw() {
	m.Pin, m.PinnedBy = "", ""
	m.withdrawKey()
}

// DropIP removes ip from the driver's pin; with the last IP the pin and
// its markers go. False, and nothing changes, for a pin the driver did not
// write or one without ip.
func (m *Marks) DropIP(ip string) bool {
	if m.PinnedBy == "" {
		return false
	}
	var keep []string
	found := false
	for _, f := range strings.Split(m.Pin, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if got, err := names.ParseAddress(f); err == nil && got.String() == ip {
			found = true
			continue
		}
		keep = append(keep, f)
	}
	if !found {
		return false
	}
	if rest := strings.Join(keep, ","); rest != "" {
		m.Pin = rest
	} else {
		m.Withdraw()
	}
	return true
}

// Park makes a placeholder step aside into the parking pool: no pin and no
// sharing key (a first allocation with a key would cost MetalLB a full
// pass), the parking pool requested.
func (m *Marks) Park(pool string) {
	m.Pin, m.LegacyPin, m.Sharing, m.LegacySharing, m.LegacyPool = "", "", "", "", ""
	m.Pool = pool
}

// Hold marks a placeholder holding exactly ip with exactly the sharing key
// key (none when empty), drawing from pool when pool is not empty.
func (m *Marks) Hold(ip, key, pool string) {
	m.Pin, m.Sharing, m.LegacySharing = ip, key, ""
	if pool != "" {
		m.Pool = pool
	}
}

// Parked reports whether a placeholder asks for the parking pool named
// pool and no address of its own: it has stepped aside.
func (m Marks) Parked(pool string) bool {
	return pool != "" && m.Pool == pool && m.Pin == "" && m.LegacyPin == ""
}

// PinnedExactly reports whether the pin names exactly ip.
func (m Marks) PinnedExactly(ip string) bool {
	return slices.Equal(m.PinIPs(), []string{ip})
}

// KeyedExactly reports whether the Service carries exactly the sharing key
// key (none when key is empty) and not the legacy spelling, which MetalLB
// ignores beside the current one but which would mislead a reader.
func (m Marks) KeyedExactly(key string) bool {
	return m.Sharing == key && m.LegacySharing == ""
}

// SharesOurKey reports whether the driver wrote the sharing key.
func (m Marks) SharesOurKey() bool { return m.SharedBy != "" }

// Granted reports whether the grant label names class.
func (m Marks) Granted(class string) bool { return class != "" && m.Grant == class }
