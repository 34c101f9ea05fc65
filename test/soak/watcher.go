package soak

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
)

// Violation is one broken invariant.
type Violation struct {
	Kind   string
	Detail string
	At     time.Time
}

// Tally counts checks and violations by kind.
type Tally struct {
	mu         sync.Mutex
	Checks     map[string]int
	Violations []Violation
}

func newTally() *Tally { return &Tally{Checks: map[string]int{}} }

func (t *Tally) check(kind string) { t.mu.Lock(); t.Checks[kind]++; t.mu.Unlock() }

func (t *Tally) violate(kind, format string, args ...any) {
	t.mu.Lock()
	t.Violations = append(t.Violations, Violation{Kind: kind, Detail: fmt.Sprintf(format, args...), At: time.Now()})
	t.mu.Unlock()
}

// ByKind counts the violations of each kind.
func (t *Tally) ByKind() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]int{}
	for _, v := range t.Violations {
		out[v.Kind]++
	}
	return out
}

// Invariants checked while the storm runs.
const (
	CheckDoubleHold  = "no-double-hold"
	CheckIPStable    = "address-keeps-ip"
	CheckOneAddress  = "one-address-per-ip"
	CheckClaimKeeps  = "bound-claim-keeps-address"
	CheckLostWarned  = "lost-has-warning"
	CheckRetainLives = "retain-address-survives"
)

type suspect struct {
	since    time.Time
	holders  string
	reported bool
}

// Watcher checks the invariants that must hold at every instant from the
// API's watch streams (Services, IPAddresses, claims and Warning Events),
// for the whole storm, across API server restarts (the informers re-list).
type Watcher struct {
	tally         *Tally
	placeholderNS string
	grace         time.Duration
	cache         cache.Cache

	mu        sync.Mutex
	services  map[types.NamespacedName]*corev1.Service
	holders   map[string]map[types.NamespacedName]bool // IP in the universe -> Services holding it
	addresses map[string]*iadv1alpha1.IPAddress
	byIP      map[string]map[string]bool // IP -> live address names
	everIP    map[string]string          // address name -> the IP it ever had
	lostSeen  map[string]bool
	lost      map[types.UID]*lostTrack
	suspects  map[string]*suspect
	retain    map[string]string // Retain address name -> uid, every one seen
	losses    []loss

	// Warnings said, by the driver (judged) and by others (counted).
	warnings   []warning
	said       map[types.UID]int32 // Event uid -> how often it was said when last seen
	saidBefore map[string]bool     // reason and object of every Warning seen
	others     map[string]int      // source and reason -> Warnings of others
	addrClass  map[string]string   // address name -> class
	claimClass map[string]string   // claim namespace/name -> class

	// history returns the storm's operations and faults so far (nil: none).
	history func() []stormEvent
}

// Follow gives the watcher the storm's history: a Lost phase while the API
// server was down gets its Warning when the driver can write it again.
func (w *Watcher) Follow(history func() []stormEvent) {
	w.mu.Lock()
	w.history = history
	w.mu.Unlock()
}

// apiDown reports whether the API server was being restarted at some time
// in [from, to]. The caller holds w.mu.
func (w *Watcher) apiDown(from, to time.Time) bool {
	if w.history == nil {
		return false
	}
	for _, h := range w.history() {
		if h.Fault && h.Kind == faultAPIServer && !h.Start.After(to) && !h.End.Before(from) {
			return true
		}
	}
	return false
}

// NewWatcher starts informers on the cluster and returns once they synced.
func NewWatcher(ctx context.Context, cfg *rest.Config, placeholderNS string, grace time.Duration, tally *Tally) (*Watcher, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	c, err := cache.New(cfg, cache.Options{
		Scheme: bootstrap.Scheme(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Event{}: {Field: fields.OneTermEqualSelector("type", corev1.EventTypeWarning)},
		},
	})
	if err != nil {
		return nil, err
	}
	w := &Watcher{tally: tally, placeholderNS: placeholderNS, grace: grace, cache: c,
		services: map[types.NamespacedName]*corev1.Service{}, holders: map[string]map[types.NamespacedName]bool{},
		addresses: map[string]*iadv1alpha1.IPAddress{}, byIP: map[string]map[string]bool{}, everIP: map[string]string{},
		lostSeen: map[string]bool{}, lost: map[types.UID]*lostTrack{}, suspects: map[string]*suspect{},
		retain: map[string]string{}, said: map[types.UID]int32{}, saidBefore: map[string]bool{}, others: map[string]int{},
		addrClass: map[string]string{}, claimClass: map[string]string{}}
	handlers := []struct {
		obj client.Object
		h   toolscache.ResourceEventHandlerFuncs
	}{
		{&corev1.Service{}, changes(w.onService)},
		{&iadv1alpha1.IPAddress{}, changes(w.onAddress)},
		{&iadv1alpha1.IPAddressClaim{}, toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { w.noteClaim(o.(*iadv1alpha1.IPAddressClaim)) },
			UpdateFunc: func(o, n any) { w.onClaim(o.(*iadv1alpha1.IPAddressClaim), n.(*iadv1alpha1.IPAddressClaim)) },
		}},
		{&corev1.Event{}, toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { w.onEvent(o.(*corev1.Event)) },
			UpdateFunc: func(_, n any) { w.onEvent(n.(*corev1.Event)) },
		}},
	}
	for _, h := range handlers {
		inf, err := c.GetInformer(ctx, h.obj)
		if err != nil {
			return nil, err
		}
		if _, err := inf.AddEventHandler(h.h); err != nil {
			return nil, err
		}
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("the watcher's caches did not sync")
	}
	go w.tick(ctx)
	return w, nil
}

func unwrap(o any) any {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return o
}

// ledgerAddress is an IPAddress the ledger records for ip, nil when none
// does. The caller holds w.mu.
func (w *Watcher) ledgerAddress(ip string) *iadv1alpha1.IPAddress {
	var addr *iadv1alpha1.IPAddress
	for name := range w.byIP[ip] {
		addr = w.addresses[name]
	}
	return addr
}

// changes turns on(old, cur) into informer handlers: an add has no old, a
// delete (also one the informer saw only as a tombstone) no cur.
func changes[T client.Object](on func(old, cur T)) toolscache.ResourceEventHandlerFuncs {
	var none T
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { on(none, o.(T)) },
		UpdateFunc: func(o, n any) { on(o.(T), n.(T)) },
		DeleteFunc: func(o any) {
			if t, ok := unwrap(o).(T); ok {
				on(t, none)
			}
		},
	}
}

func (w *Watcher) onService(old, cur *corev1.Service) {
	w.mu.Lock()
	defer w.mu.Unlock()
	touched := map[string]bool{}
	if old != nil {
		key := client.ObjectKeyFromObject(old)
		for _, ip := range IngressIPs(old) {
			if h := w.holders[ip]; h != nil {
				delete(h, key)
			}
			touched[ip] = true
		}
		delete(w.services, key)
	}
	if cur != nil {
		key := client.ObjectKeyFromObject(cur)
		w.services[key] = cur
		for _, ip := range IngressIPs(cur) {
			if !Universe(ip) {
				continue
			}
			if w.holders[ip] == nil {
				w.holders[ip] = map[types.NamespacedName]bool{}
			}
			w.holders[ip][key] = true
			touched[ip] = true
		}
	}
	for ip := range touched {
		if Universe(ip) {
			w.evalHold(ip)
		}
	}
}

// evalHold checks one IP's holders. A double hold not allowed right now is
// a suspect; it becomes a violation if it is still there, still not
// allowed, after the grace period (the tick judges it).
func (w *Watcher) evalHold(ip string) {
	w.tally.check(CheckDoubleHold)
	var holders []*corev1.Service
	var desc []string
	for k := range w.holders[ip] {
		if s := w.services[k]; s != nil {
			holders = append(holders, s)
			desc = append(desc, k.String())
		}
	}
	sort.Strings(desc)
	if DoubleHoldAllowed(w.ledgerAddress(ip), holders, w.placeholderNS) {
		delete(w.suspects, ip)
		return
	}
	if s := w.suspects[ip]; s != nil && s.holders == strings.Join(desc, ",") {
		return
	}
	w.suspects[ip] = &suspect{since: time.Now(), holders: strings.Join(desc, ",")}
}

func (w *Watcher) onAddress(old, cur *iadv1alpha1.IPAddress) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if cur == nil {
		delete(w.addresses, old.Name)
		if m := w.byIP[old.Spec.Address]; m != nil {
			delete(m, old.Name)
		}
		w.tally.check(CheckRetainLives)
		if old.Spec.ReclaimPolicy == iadv1alpha1.ReclaimRetain {
			w.tally.violate(CheckRetainLives, "Retain address %s (%s) was deleted", old.Name, old.Spec.Address)
		}
		if Universe(old.Spec.Address) {
			w.evalHold(old.Spec.Address)
		}
		return
	}
	w.tally.check(CheckIPStable)
	if ip, ok := w.everIP[cur.Name]; ok && ip != cur.Spec.Address {
		w.tally.violate(CheckIPStable, "address %s changed IP from %s to %s", cur.Name, ip, cur.Spec.Address)
	}
	w.everIP[cur.Name] = cur.Spec.Address
	w.addrClass[cur.Name] = cur.Spec.ClassName
	if cur.Spec.ReclaimPolicy == iadv1alpha1.ReclaimRetain {
		w.retain[cur.Name] = string(cur.UID)
	}
	w.addresses[cur.Name] = cur
	if w.byIP[cur.Spec.Address] == nil {
		w.byIP[cur.Spec.Address] = map[string]bool{}
	}
	w.byIP[cur.Spec.Address][cur.Name] = true
	w.tally.check(CheckOneAddress)
	if n := len(w.byIP[cur.Spec.Address]); n > 1 {
		w.tally.violate(CheckOneAddress, "IP %s is in %d addresses at once", cur.Spec.Address, n)
	}
	if cur.Status.Phase == iadv1alpha1.AddressLost && (old == nil || old.Status.Phase != iadv1alpha1.AddressLost) {
		w.lostSeen[cur.Name] = true
		t := w.lost[cur.UID]
		if t == nil {
			t = &lostTrack{name: cur.Name}
			w.lost[cur.UID] = t
		}
		t.at = append(t.at, time.Now())
	}
	if Universe(cur.Spec.Address) {
		w.evalHold(cur.Spec.Address)
	}
}

// noteClaim records the class of a claim, for the Warnings about it.
func (w *Watcher) noteClaim(c *iadv1alpha1.IPAddressClaim) {
	w.mu.Lock()
	w.claimClass[c.Namespace+"/"+c.Name] = c.Spec.ClassName
	w.mu.Unlock()
}

func (w *Watcher) onClaim(old, cur *iadv1alpha1.IPAddressClaim) {
	w.noteClaim(cur)
	lost, left := ClaimLoss(old, cur)
	if old.Status.Phase != iadv1alpha1.ClaimBound || cur.DeletionTimestamp != nil {
		return
	}
	w.tally.check(CheckClaimKeeps)
	if len(lost) == 0 && !left {
		return
	}
	var all []string
	for _, a := range old.Status.Addresses {
		all = append(all, a.Name)
	}
	// The address's own update (phase Lost) may reach the watcher after
	// the claim's, on another stream: the tick judges this within the
	// grace period.
	w.mu.Lock()
	w.losses = append(w.losses, loss{claim: cur.Namespace + "/" + cur.Name, phase: string(cur.Status.Phase),
		lost: lost, left: left, addresses: all, at: time.Now()})
	w.mu.Unlock()
}

// loss is a Bound claim seen losing addresses or leaving Bound, waiting to
// be judged: allowed only through phase Lost of the address.
type loss struct {
	claim, phase string
	lost         []string
	left         bool
	addresses    []string
	at           time.Time
}

// judgeLoss returns whether the loss is explained by Lost phases, and what
// is wrong otherwise.
func (w *Watcher) judgeLoss(l loss) (bool, []string) {
	var wrong []string
	for _, name := range l.lost {
		if !w.lostSeen[name] {
			wrong = append(wrong, fmt.Sprintf("Bound claim %s lost address %s without it going Lost", l.claim, name))
		}
	}
	if l.left {
		through := false
		for _, name := range l.addresses {
			through = through || w.lostSeen[name]
		}
		if !through {
			wrong = append(wrong, fmt.Sprintf("Bound claim %s went %q without an address going Lost", l.claim, l.phase))
		}
	}
	return len(wrong) == 0, wrong
}

// ReasonAddressLost is the Warning said about an address that went Lost.
const ReasonAddressLost = "AddressLost"

// driverSource is the prefix of the driver's Event sources.
const driverSource = "metallb-iad-"

// timesSaid is how often an Event was said, whichever API wrote it.
func timesSaid(e *corev1.Event) int32 {
	if e.Series != nil {
		return max(e.Series.Count, 1)
	}
	return max(e.Count, 1)
}

// onEvent counts each time a Warning is said: a new Event, or a repeat the
// recorder folded into one (its count).
func (w *Watcher) onEvent(e *corev1.Event) {
	if e.Type != corev1.EventTypeWarning {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	n := timesSaid(e) - w.said[e.UID]
	if n <= 0 {
		return
	}
	w.said[e.UID] = timesSaid(e)
	src := e.Source.Component
	if src == "" {
		src = e.ReportingController
	}
	io := e.InvolvedObject
	if io.Kind == "IPAddress" && e.Reason == ReasonAddressLost {
		// The driver's Warning witnesses the phase too: across an API
		// server restart the watch relists and may never show the
		// address Lost before it recovers.
		w.lostSeen[io.Name] = true
		t := w.lost[io.UID]
		if t == nil {
			t = &lostTrack{name: io.Name}
			w.lost[io.UID] = t
		}
		t.said += int(n)
	}
	if !strings.HasPrefix(src, driverSource) {
		w.others[src+" "+e.Reason] += int(n)
		return
	}
	wn := warning{Reason: e.Reason, Kind: io.Kind, Namespace: io.Namespace, Name: io.Name, Source: src, Message: e.Message, At: time.Now()}
	switch io.Kind {
	case "IPAddress":
		wn.Class = w.addrClass[io.Name]
	case "IPAddressClass":
		wn.Class = io.Name
	case "IPAddressClaim":
		wn.Class = w.claimClass[io.Namespace+"/"+io.Name]
	case "Service":
		if s := w.services[types.NamespacedName{Namespace: io.Namespace, Name: io.Name}]; s != nil {
			wn.Class = w.claimClass[io.Namespace+"/"+s.Annotations[iadv1alpha1.ServiceClaimAnnotation]]
		}
	}
	for range n {
		key := wn.Reason + " " + wn.object()
		wn.Repeat = w.saidBefore[key]
		w.saidBefore[key] = true
		w.warnings = append(w.warnings, wn)
	}
}

// Warnings returns the Warnings the driver said, and the number of
// Warnings of others by source and reason.
func (w *Watcher) Warnings() ([]warning, map[string]int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	others := map[string]int{}
	for k, v := range w.others {
		others[k] = v
	}
	return append([]warning(nil), w.warnings...), others
}

// tick judges suspects and Lost phases waiting for their Warning.
func (w *Watcher) tick(ctx context.Context) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w.judge(false)
	}
}

// judge turns overdue suspects into violations; with final, every suspect
// and every pending Lost is judged now.
func (w *Watcher) judge(final bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	for ip, s := range w.suspects {
		if s.reported || (!final && now.Sub(s.since) < w.grace) {
			continue
		}
		// Re-judge with what is known now: the address may have gone
		// Conflict without any Service changing.
		var holders []*corev1.Service
		for k := range w.holders[ip] {
			if sv := w.services[k]; sv != nil {
				holders = append(holders, sv)
			}
		}
		addr := w.ledgerAddress(ip)
		if DoubleHoldAllowed(addr, holders, w.placeholderNS) {
			delete(w.suspects, ip)
			continue
		}
		if now.Sub(s.since) < w.grace {
			continue
		}
		s.reported = true
		phase := "no address"
		if addr != nil {
			phase = fmt.Sprintf("address %s phase %q", addr.Name, addr.Status.Phase)
		}
		w.tally.violate(CheckDoubleHold, "IP %s held by %s for over %s (%s)", ip, s.holders, w.grace, phase)
	}
	var keep []loss
	for _, l := range w.losses {
		ok, wrong := w.judgeLoss(l)
		switch {
		case ok:
		case !final && now.Sub(l.at) < w.grace:
			keep = append(keep, l)
		default:
			for _, msg := range wrong {
				w.tally.violate(CheckClaimKeeps, "%s", msg)
			}
		}
	}
	w.losses = keep
	for _, t := range w.lost {
		// Each time the address goes Lost, one more AddressLost must be
		// said about it (a new Event, or a repeat counted on the last).
		for ; t.judged < len(t.at); t.judged++ {
			at := t.at[t.judged]
			// The recorder writes nothing while the API server is down
			// (client-go tries again 10 s apart): a Lost phase then waits
			// for the end of the run, not the grace.
			if t.said <= t.judged && !final && (now.Sub(at) <= w.grace || w.apiDown(at.Add(-w.grace), now)) {
				break
			}
			w.tally.check(CheckLostWarned)
			if t.said <= t.judged {
				w.tally.violate(CheckLostWarned, "address %s went Lost (time %d) with no AddressLost Warning on it within %s (%d said)",
					t.name, t.judged+1, w.grace, t.said)
			}
		}
	}
}

// lostTrack follows one address (by uid): when it went Lost, how often
// AddressLost was said about it, and how many of its Lost phases are judged.
type lostTrack struct {
	name   string
	at     []time.Time
	said   int
	judged int
}

// Finish judges what is still pending.
func (w *Watcher) Finish() { w.judge(true) }

// Retained returns every Retain address seen, by name and uid.
func (w *Watcher) Retained() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]string{}
	for k, v := range w.retain {
		out[k] = v
	}
	return out
}
