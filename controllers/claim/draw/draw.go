// Package draw is the draw pipeline the claim binary's claim and warm
// controllers share: one Draw, run by either owner (Owner), takes an
// address from a class's pool; the book of draws in flight (Book, Locks),
// the placeholders' holds (Holds), the pauses after a give-back (Pauses)
// and the class ledgers (Ledger) are the state the two share.
package draw

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/patch"
	"github.com/cozystack/metallb-iad/internal/phase"
	"github.com/cozystack/metallb-iad/internal/stale"
)

// The draw pipeline takes an address from a class's pool, for a claim's
// family (the claim controller's claim_draw.go) or as a warm address (the
// warm controller's warm_draw.go): create a
// placeholder, observe MetalLB's answer, record the address, then hand the
// placeholder over to its IPAddress or give the address back. The pipeline
// makes these writes; its owner, a drawer, says what differs.

// CacheWait bounds the wait for the cache to show what a pass created.
const CacheWait = 10 * time.Second

// Owner is the owner of a draw.
type Owner interface {
	Placeholder() *corev1.Service
	// Judge reads the ledger about ip (entry name addrName) and says what
	// the owner may do with it, with the deciding entry.
	Judge(ctx context.Context, ip, addrName string) (LedgerAnswer, *iadv1alpha1.IPAddress, error)
	// RecordEntry records ip for the owner (entry: the one judge found
	// ours, else nil) and judges again: LedgerOurs with the entry to hand
	// ph over to, or LedgerFree when it recorded nothing (NewsUnrecorded).
	RecordEntry(ctx context.Context, ph *corev1.Service, ip, addrName string, entry *iadv1alpha1.IPAddress) (LedgerAnswer, *iadv1alpha1.IPAddress, error)
	// HandOver returns the change handing ph over to a; nil: nothing to do.
	HandOver(ph *corev1.Service, a *iadv1alpha1.IPAddress) func()
	// Report logs and records what happened, and returns its phase result.
	Report(ctx context.Context, n News) phase.Result
}

type News struct {
	Kind  NewsKind
	PH    *corev1.Service
	IP    string
	Entry *iadv1alpha1.IPAddress
}

type NewsKind int

const (
	NewsCreated NewsKind = iota
	// NewsPinnedElsewhere: ph is pinned to another address than ip, the
	// one MetalLB reports (MetalLB has not caught up).
	NewsPinnedElsewhere
	NewsEntryGoing
	NewsGaveBack
	NewsHandedOver
	// NewsUnrecorded: recordEntry recorded nothing this pass.
	NewsUnrecorded
)

// Draw is one owner's draw of family f from a class.
type Draw struct {
	bootstrap.Deps
	Owner Owner
	Class string
	F     iadv1alpha1.IPFamily
	// What names the owner's placeholders in errors.
	What string
	// Written, if set, records the placeholders' patches.
	Written *patch.Written
}

// CreatePlaceholder creates the owner's placeholder and waits for the cache to show
// it; one that exists already is left to its own watch event.
func (d Draw) CreatePlaceholder(ctx context.Context) (phase.Result, error) {
	ph := d.Owner.Placeholder()
	created, err := patch.CreateAndWait(ctx, d.Client, d.APIReader, ph, CacheWait)
	switch {
	case created:
		return d.Owner.Report(ctx, News{Kind: NewsCreated, PH: ph}), err
	case err != nil:
		return phase.Next(), fmt.Errorf("create %s: %w", d.describe(ph), err)
	}
	return phase.WaitFor("the cache to show the existing placeholder", 0), nil
}

// StartPlaceholder creates the owner's placeholder without waiting for the cache to
// show it (the draw is in its class's book until then), and reports whether
// this call created it; one that exists already is left to its own watch
// event.
func (d Draw) StartPlaceholder(ctx context.Context) (bool, phase.Result, error) {
	ph := d.Owner.Placeholder()
	switch err := d.Create(ctx, ph); {
	case apierrors.IsAlreadyExists(err):
		return false, phase.WaitFor("the cache to show the existing placeholder", 0), nil
	case err != nil:
		return false, phase.Next(), fmt.Errorf("create %s: %w", d.describe(ph), err)
	}
	return true, d.Owner.Report(ctx, News{Kind: NewsCreated, PH: ph}), nil
}

// describe names a placeholder in errors (by class before it has a name).
func (d Draw) describe(ph *corev1.Service) string {
	if ph.Name == "" {
		return d.What + " for class " + d.Class
	}
	return d.What + " " + ph.Name
}

// Refusal is MetalLB's latest refusal of ph, from the cache, or nil.
func (d Draw) Refusal(ctx context.Context, ph *corev1.Service) (*corev1.Event, error) {
	var evs corev1.EventList
	if err := d.List(ctx, &evs, client.InNamespace(d.PlaceholderNamespace),
		client.MatchingFields{index.EventByInvolvedUID: string(ph.UID)}); err != nil {
		return nil, err
	}
	return stale.LatestFailure(evs.Items, ph.UID), nil
}

// Record judges the address MetalLB assigned ph against the ledger before
// anything is written, then records it and hands ph over, or gives it back.
// It reports whether ph ended handed over. Each write is idempotent: a
// pass that stops half-way is finished by the next.
func (d Draw) Record(ctx context.Context, ph *corev1.Service) (bool, phase.Result, error) {
	ip := AssignedIP(ph, d.F)
	addr, _ := names.ParseAddress(ip) // assignedIP returns only parsed, canonical addresses
	addrName, err := names.AddressName(addr)
	if err != nil {
		return false, phase.Next(), err
	}
	answer, entry, err := d.Owner.Judge(ctx, ip, addrName)
	if err != nil {
		return false, phase.Next(), err
	}
	if answer == LedgerFree || answer == LedgerOurs {
		if m := marks.Of(ph); m.Pin != "" && !m.PinnedExactly(ip) {
			return false, d.Owner.Report(ctx, News{Kind: NewsPinnedElsewhere, PH: ph, IP: ip}), nil
		}
		if answer, entry, err = d.Owner.RecordEntry(ctx, ph, ip, addrName, entry); err != nil {
			return false, phase.Next(), err
		}
	}
	switch answer {
	case LedgerOurs:
		res, err := d.HandOver(ctx, ph, entry)
		return true, res, err
	case LedgerTaken:
		res, err := d.giveBack(ctx, ph, ip, entry)
		return false, res, err
	case LedgerGoing:
		return false, d.Owner.Report(ctx, News{Kind: NewsEntryGoing, PH: ph, IP: ip, Entry: entry}), nil
	}
	return false, d.Owner.Report(ctx, News{Kind: NewsUnrecorded, PH: ph, IP: ip}), nil
}

// HandOver hands ph over to a, in one patch: MetalLB, which rewrites a
// Service's status on each change it sees, sees one.
func (d Draw) HandOver(ctx context.Context, ph *corev1.Service, a *iadv1alpha1.IPAddress) (phase.Result, error) {
	change := d.Owner.HandOver(ph, a)
	if change == nil {
		return phase.Next(), nil
	}
	ip := AssignedIP(ph, d.F)
	if err := d.PatchPlaceholder(ctx, ph, change); err != nil {
		return phase.Next(), fmt.Errorf("hand %s %s over to IPAddress %s: %w", d.What, ph.Name, a.Name, err)
	}
	return d.Owner.Report(ctx, News{Kind: NewsHandedOver, PH: ph, IP: ip, Entry: a}), nil
}

// giveBack deletes ph, exactly as the pass read it, which frees ip in
// MetalLB for entry's owner; one already gone is no news.
func (d Draw) giveBack(ctx context.Context, ph *corev1.Service, ip string, entry *iadv1alpha1.IPAddress) (phase.Result, error) {
	deleted, err := patch.Delete(ctx, d.Client, ph, true)
	if err != nil {
		return phase.Next(), fmt.Errorf("give back %s: delete placeholder %s: %w", ip, ph.Name, err)
	}
	if !deleted {
		return phase.Next(), nil
	}
	log.FromContext(ctx).Info("gave back an address the ledger records for someone else", "family", d.F, "ip", ip,
		"ipaddress", entry.Name, "placeholder", ph.Name)
	AllocationsTotal.WithLabelValues(d.Class, string(d.F), ResultReturned).Inc()
	return d.Owner.Report(ctx, News{Kind: NewsGaveBack, PH: ph, IP: ip, Entry: entry}), nil
}

// PatchPlaceholder patches a placeholder (patch.Meta), recorded in written if set.
func (d Draw) PatchPlaceholder(ctx context.Context, ph *corev1.Service, change func()) error {
	before := ph.ResourceVersion
	if err := patch.Meta(ctx, d.Client, ph, change); err != nil {
		return err
	}
	if d.Written != nil && ph.ResourceVersion != before {
		d.Written.Wrote(client.ObjectKeyFromObject(ph).String(), before)
	}
	return nil
}

// DrawnPlaceholders lists, without copies, the placeholders drawing from
// a class and not handed over yet.
func DrawnPlaceholders(ctx context.Context, c client.Reader, namespace, class string) ([]corev1.Service, error) {
	var phs corev1.ServiceList
	if err := c.List(ctx, &phs, client.InNamespace(namespace), client.MatchingFields{index.PlaceholderDrawnByClass: class},
		client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	return phs.Items, nil
}

// Shared is what the claim binary's claim and warm controllers draw under
// together: each class's book of draws in flight behind its lock (Draws),
// the IPs the placeholders hold (Holds), and the stale allocations of a
// class's free addresses already cleared (Cleared). The claim controller
// keeps it and hands the warm controller a pointer.
type Shared struct {
	Draws   Locks
	Holds   Holds
	Cleared stale.Memo
}

// Holds counts, from the placeholder informer, the IPs the
// cached placeholders not being deleted hold, under the address they are
// labelled with and the claim uid they carry (heldKey). A draw decision
// asks it about every address of the ledger not reported Held, a few on a
// quiet class and thousands in a burst: each answer is a map lookup, with
// no list of the placeholders. It follows the cache a moment behind, as
// the cache follows the API server: a placeholder seen late holds nothing
// yet, and the draw waits.
type Holds struct {
	mu sync.RWMutex
	n  map[string]int
}

// HeldBy reports whether a placeholder labelled with the address, or,
// before the hand-over, the allocation placeholder of the claim it is
// bound to, holds ip.
func (h *Holds) HeldBy(a *iadv1alpha1.IPAddress, ip string) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.n[heldKey("address", a.Name, ip)] > 0 {
		return true
	}
	ref := a.Spec.ClaimRef
	return ref != nil && ref.UID != "" && h.n[heldKey("claim", string(ref.UID), ip)] > 0
}

// change counts what cur holds in place of what old held (either nil).
func (h *Holds) change(old, cur *corev1.Service) {
	gone, come := holdKeys(old), holdKeys(cur)
	if len(gone) == 0 && len(come) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == nil {
		h.n = map[string]int{}
	}
	for _, k := range gone {
		if h.n[k]--; h.n[k] <= 0 {
			delete(h.n, k)
		}
	}
	for _, k := range come {
		h.n[k]++
	}
}

// Handler keeps the counts from the Service informer's events.
func (h *Holds) Handler() toolscache.ResourceEventHandler {
	svc := func(o any) *corev1.Service {
		if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		s, _ := o.(*corev1.Service)
		return s
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { h.change(nil, svc(o)) },
		UpdateFunc: func(old, cur any) { h.change(svc(old), svc(cur)) },
		DeleteFunc: func(o any) { h.change(svc(o), nil) },
	}
}

// holdKeys are the keys under which ph, a placeholder not being deleted,
// holds the IPs MetalLB assigned it; none for nil.
func holdKeys(ph *corev1.Service) []string {
	if ph == nil || ph.DeletionTimestamp != nil {
		return nil
	}
	var keys []string
	for _, f := range iadv1alpha1.FamilyDual.Families() {
		ip := AssignedIP(ph, f)
		if ip == "" {
			continue
		}
		if v := ph.Labels[marks.LabelAddress]; v != "" {
			keys = append(keys, heldKey("address", v, ip))
		}
		if v := ph.Labels[marks.LabelClaimUID]; v != "" {
			keys = append(keys, heldKey("claim", v, ip))
		}
	}
	return keys
}

func heldKey(by, name, ip string) string { return by + "\x00" + name + "\x00" + ip }

// Locks keeps, per class, what deciding a draw needs (inflight.go):
// a lock held only while a pass decides from memory (its cache and the
// book of draws in flight) whether MetalLB can give the class another
// address, and that book. A claim's pass makes every API call outside the
// lock; the warm controller holds it across its pass, creating with
// CreateAndWait, so the cache shows what it drew once it lets go.
type Locks struct {
	mu sync.Mutex
	m  map[string]*Book
}

// Of returns the class's entry, made on first use.
func (l *Locks) Of(class string) *Book {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]*Book{}
	}
	c, ok := l.m[class]
	if !ok {
		c = &Book{}
		l.m[class] = c
	}
	return c
}

// Settle takes the draw of placeholder name out of its class's book.
func (l *Locks) Settle(class, name string) {
	l.mu.Lock()
	c := l.m[class]
	l.mu.Unlock()
	if c != nil {
		c.Settle(name)
	}
}
