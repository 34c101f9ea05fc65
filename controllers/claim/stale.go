package claim

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/stale"
)

// Stale allocations of free addresses.
//
// MetalLB v0.15.2 ignores single-Service events until its first full pass
// after a start succeeds (docs/design.md §3, stale allocations). A Service
// deleted in that window keeps its address in MetalLB's allocator,
// invisible in the API. The IPAddress controller clears such an
// allocation when it keeps an address of the ledger from its hold; when the
// address was deleted meanwhile (a claim deleted, a warm address trimmed),
// nobody's address is blocked, and MetalLB refuses every new placeholder
// of the class with "no free address" while the ledger shows room. The
// claim controller then clears the stale allocations of the class's free
// addresses the same way: a headless Service of the deleted Service's
// name (a placeholder, or a tenant's Service the address was attached to),
// created and deleted at once, makes MetalLB process the name and forget
// the allocation, and the full pass that follows serves the waiting
// placeholders.

// staleWait is how long a placeholder must have been refused for lack of
// room the ledger shows before the class's free addresses are looked for
// in MetalLB's books, and how often that is done again while it lasts: a
// placeholder deleted a moment ago may not be processed by MetalLB yet.
const staleWait = 10 * time.Second

// maxStaleClears bounds the Services one pass creates and deletes.
const maxStaleClears = 16

// ReasonStaleAllocationCleared (Normal, on the class): a stale allocation
// of a free address was cleared.
const ReasonStaleAllocationCleared = "StaleAllocationCleared"

// assignment is an address MetalLB reported assigning, and when it last
// did.
type assignment struct {
	ip string
	at time.Time
}

// staleHolders returns, from MetalLB's IPAllocated Events, the Services it
// assigned an address of family f in ranges that no entry of the ledger
// records, with that address: the Services that may still book a free
// address in MetalLB. A Service appears once, with its latest Event. An
// Event is believed only about its own namespace: anyone who may write
// Events in a namespace could name another one's Service.
func staleHolders(evs []corev1.Event, f iadv1alpha1.IPFamily, ranges []classparams.AddressRange, ledger map[string]bool) map[types.NamespacedName]assignment {
	out := map[types.NamespacedName]assignment{}
	for i := range evs {
		e := &evs[i]
		if e.Reason != names.MetalLBIPAllocated || e.InvolvedObject.Kind != "Service" || e.InvolvedObject.Namespace != e.Namespace {
			continue
		}
		key := types.NamespacedName{Namespace: e.InvolvedObject.Namespace, Name: e.InvolvedObject.Name}
		for _, ip := range quotedAddresses(e.Message) {
			if addressFamily(ip) != f || ledger[ip] || !inRanges(ranges, ip) {
				continue
			}
			if prev, ok := out[key]; !ok || stale.EventTime(e).After(prev.at) {
				out[key] = assignment{ip: ip, at: stale.EventTime(e)}
			}
		}
	}
	return out
}

// quotedAddresses returns the addresses quoted in a message of MetalLB's
// (`Assigned IP ["10.0.0.1","fd00::1"]`), in the ledger's form.
func quotedAddresses(msg string) []string {
	var out []string
	parts := strings.Split(msg, `"`)
	for i := 1; i < len(parts); i += 2 {
		if a, err := names.ParseAddress(parts[i]); err == nil {
			out = append(out, a.String())
		}
	}
	return out
}

// staleClearer clears stale allocations of a class's free addresses. The
// claim and warm controllers share it. Its APIReader reads Events with a
// field selector the cache does not serve, and confirms a Service is gone.
type staleClearer struct {
	bootstrap.Deps
	// cleared remembers the names cleared lately.
	cleared *staleMemo
}

// staleForget is how long the memory of a clear is kept: longer than
// MetalLB's Events live (an hour by default).
const staleForget = 2 * time.Hour

// staleRetryMax caps the wait before the same assignment is cleared again.
const staleRetryMax = 10 * time.Minute

// staleMemo remembers, for each Service name cleared, the time of the
// IPAllocated Event it was cleared for and how often it was cleared for
// it. A clear that MetalLB ignores (it was made while MetalLB's first pass
// after a start still failed, when it drops single-Service events too) is
// made again while the refusal lasts, each time after twice the wait
// before (staleWait, 20 s, 40 s, ... up to staleRetryMax): a clear MetalLB
// took ends the refusal, and one it ignored is not left for good.
type staleMemo struct {
	mu sync.Mutex
	at map[types.NamespacedName]staleClear
	// last is, per class, when the last clear was made for it that
	// created and deleted a Service.
	last map[string]time.Time
}

// lastClear is when the last clear was made for class that created and
// deleted a Service.
func (m *staleMemo) lastClear(class string) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last[class]
}

// made records that a clear for class created and deleted a Service at
// now.
func (m *staleMemo) made(class string, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last == nil {
		m.last = map[string]time.Time{}
	}
	for c, at := range m.last {
		if now.Sub(at) >= staleForget {
			delete(m.last, c)
		}
	}
	m.last[class] = now
}

// staleClear is the clears of one name: the assignment they were for, when
// the last one was made and how many were made.
type staleClear struct {
	assigned, cleared time.Time
	times             int
}

// retryAfter is how long after the last clear the same assignment may be
// cleared again.
func (c staleClear) retryAfter() time.Duration {
	wait := staleWait
	for i := 1; i < c.times && wait < staleRetryMax; i++ {
		wait *= 2
	}
	return min(wait, staleRetryMax)
}

// due reports whether key is to be cleared now for an assignment at
// assigned (a later assignment than the last clear's, or the same one
// once its retry wait is over), and if so records the clear at now; if
// not, how long until it is. Clears older than staleForget are forgotten.
func (m *staleMemo) due(key types.NamespacedName, assigned, now time.Time) (bool, time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, c := range m.at {
		if now.Sub(c.cleared) >= staleForget {
			delete(m.at, k)
		}
	}
	c, ok := m.at[key]
	switch {
	case !ok || assigned.After(c.assigned):
		c = staleClear{assigned: assigned}
	case now.Sub(c.cleared) < c.retryAfter():
		return false, c.retryAfter() - now.Sub(c.cleared)
	}
	if m.at == nil {
		m.at = map[types.NamespacedName]staleClear{}
	}
	c.cleared, c.times = now, c.times+1
	m.at[key] = c
	return true, 0
}

// clearFree looks, for a class whose ledger and waiting placeholders
// leave room in family f while MetalLB refused the placeholders refused
// for lack of it since refusedSince, for Services that no longer exist
// and that MetalLB assigned a free address of the class, and clears each
// stale allocation. Then it pokes the refused placeholders: MetalLB does
// not retry them by itself, and a clear it had already made on its own
// started no pass. It returns when to look again while the refusal may
// last.
func (c *staleClearer) clearFree(ctx context.Context, class *iadv1alpha1.IPAddressClass, f iadv1alpha1.IPFamily,
	addrs []iadv1alpha1.IPAddress, drawn int, refusedSince time.Time, refused []*corev1.Service) (time.Duration, error) {
	wait := staleWait - time.Since(refusedSince)
	for _, ph := range refused {
		if poked, err := time.Parse(time.RFC3339Nano, ph.Annotations[names.AnnotationMetalLBRetry]); err == nil {
			wait = max(wait, staleWait-time.Since(poked))
		}
	}
	if wait > 0 {
		return wait, nil
	}
	// The refused placeholder is one of the draws: room for it means the
	// ledger and the other draws leave at least one address free.
	if full, _, _ := classFull(class, f, addrs, drawn-1); full {
		return 0, nil // MetalLB is right: the class is full
	}
	p, err := classparams.ParseParameters(class.Spec.Parameters)
	if err != nil {
		return 0, nil
	}
	ledger := map[string]bool{}
	for i := range addrs {
		if a, err := names.ParseAddress(addrs[i].Spec.Address); err == nil {
			ledger[a.String()] = true
		}
	}
	// The holder is a placeholder, or a tenant's Service the address
	// was attached to: MetalLB's Events in every namespace.
	var evs corev1.EventList
	if err := c.APIReader.List(ctx, &evs, client.MatchingFields{"reason": names.MetalLBIPAllocated}); err != nil {
		return 0, err
	}
	cleared := 0
	var next time.Duration // until the next clear that is not due yet
	for key, as := range staleHolders(evs.Items, f, p.Addresses, ledger) {
		if cleared == maxStaleClears {
			break
		}
		if due, after := c.cleared.due(key, as.at, time.Now()); !due {
			if next == 0 || after < next {
				next = after
			}
			continue
		}
		ip := as.ip
		ok, err := stale.Clear(ctx, c, c.APIReader, key, "free address "+ip)
		if err != nil {
			return 0, err
		}
		if ok {
			cleared++
			c.cleared.made(class.Name, time.Now())
			log.FromContext(ctx).Info("cleared a stale MetalLB allocation of a free address", "class", class.Name, "service", key, "ip", ip)
			c.Recorder.Event(class, corev1.EventTypeNormal, ReasonStaleAllocationCleared, msgStaleFreeCleared(ip, key))
		}
	}
	poke := refused
	if cleared == 0 {
		// Nothing is due to be cleared now. A clear made for another
		// refused placeholder since this one was refused or poked made
		// MetalLB forget an allocation without looking at this one again
		// (it reprocesses every Service only when the cleared Service had
		// a sharing key): poke those. Look again when the next clear is
		// due, if the refusal lasts until then; the refused placeholders'
		// own Events bring them back sooner when MetalLB answers.
		poke = clearedSince(refused, refusedSince, c.cleared.lastClear(class.Name))
		if len(poke) == 0 {
			return next, nil
		}
	}
	for _, ph := range poke {
		if err := stale.Poke(ctx, c, ph); err != nil {
			return 0, err
		}
	}
	return staleWait, nil
}

// clearedSince returns the placeholders last refused (at refusedSince) or
// poked before lastClear.
func clearedSince(refused []*corev1.Service, refusedSince, lastClear time.Time) []*corev1.Service {
	var out []*corev1.Service
	for _, ph := range refused {
		asked := refusedSince
		if poked, err := time.Parse(time.RFC3339Nano, ph.Annotations[names.AnnotationMetalLBRetry]); err == nil && poked.After(asked) {
			asked = poked
		}
		if lastClear.After(asked) {
			out = append(out, ph)
		}
	}
	return out
}

func msgStaleFreeCleared(ip string, key types.NamespacedName) string {
	return fmt.Sprintf("MetalLB still booked %s, which no IPAddress records, for Service %s, which no longer exists "+
		"(MetalLB missed its deletion while it was starting), and refused new placeholders for lack of room; "+
		"a Service of that name was created and deleted so that MetalLB lets go of the address", ip, key)
}
