package claim

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim/draw"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/patch"
	"github.com/cozystack/metallb-iad/internal/phase"
	"github.com/cozystack/metallb-iad/internal/placeholder"
)

// claimDraw is a claim's family as the owner of a draw: its allocation
// placeholder is named from the claim, its address recorded pre-bound to
// the claim, and what happens is told on the claim.
type claimDraw struct {
	r *Reconciler
	s *scope
	f iadv1alpha1.IPFamily
}

func (d claimDraw) Placeholder() *corev1.Service {
	return draw.RenderPlaceholder(d.r.PlaceholderNamespace, d.s.claim, d.s.class.Name, d.f)
}

// Judge asks the ledger in the cache, by address. An entry the cache does
// not show yet is met by the Create in recordEntry and judged the same way.
func (d claimDraw) Judge(ctx context.Context, ip, _ string) (draw.LedgerAnswer, *iadv1alpha1.IPAddress, error) {
	var entries iadv1alpha1.IPAddressList
	if err := d.r.List(ctx, &entries, client.MatchingFields{index.AddressByIP: ip}); err != nil {
		return draw.LedgerFree, nil, err
	}
	answer, entry := draw.LedgerVerdict(entries.Items, d.s.claim)
	return answer, entry, nil
}

func (d claimDraw) RecordEntry(ctx context.Context, _ *corev1.Service, ip, addrName string, entry *iadv1alpha1.IPAddress) (draw.LedgerAnswer, *iadv1alpha1.IPAddress, error) {
	if entry != nil {
		addrName = entry.Name
	}
	a, err := d.r.ensureAddress(ctx, d.s, ip, addrName)
	if err != nil || a == nil {
		return draw.LedgerFree, nil, err
	}
	c := d.s.claim
	if draw.BindsClaim(a, c.Namespace, c.Name, c.UID) {
		return draw.LedgerOurs, a, nil
	}
	if got, err := names.ParseAddress(a.Spec.Address); err != nil || got.String() != ip {
		d.r.Recorder.Event(c, corev1.EventTypeWarning, ReasonLedgerMismatch, msgLedgerMismatch(d.f, ip, a))
		draw.AllocationsTotal.WithLabelValues(d.s.class.Name, string(d.f), draw.ResultLedgerMismatch).Inc()
		log.FromContext(ctx).Info("ledger mismatch: the name of the address MetalLB assigned is recorded for another address",
			"family", d.f, "ip", ip, "ipaddress", a.Name)
		return draw.LedgerFree, nil, nil
	}
	answer, entry := draw.LedgerVerdict([]iadv1alpha1.IPAddress{*a}, c)
	return answer, entry, nil
}

// HandOver labels the placeholder a hold placeholder of a, grants it the
// class's pool, pins it to the address MetalLB assigned (so a MetalLB
// restart cannot hand it another) and owner-references it to a; from then
// on the IPAddress controller owns it. No sharing key: MetalLB reprocesses
// every Service when an allocation first carries one, so the IPAddress
// controller writes it only for a shared handoff.
func (d claimDraw) HandOver(ph *corev1.Service, a *iadv1alpha1.IPAddress) func() {
	ip, class := draw.AssignedIP(ph, d.f), d.s.class.Name
	if draw.HandedOver(ph, a, ip, class) {
		return nil
	}
	return func() {
		if !placeholder.OwnedByAddress(ph, a.Name) {
			ph.OwnerReferences = append(ph.OwnerReferences, placeholder.OwnerRef(a))
		}
		ph.Labels[marks.LabelPlaceholder] = names.PlaceholderHold
		ph.Labels[marks.LabelAddress] = a.Name
		marks.Edit(ph, func(m *marks.Marks) {
			m.Grant = class
			if ip != "" {
				m.Pin = ip
			}
		})
	}
}

func (d claimDraw) Report(ctx context.Context, n draw.News) phase.Result {
	r, s, f, logger := d.r, d.s, d.f, log.FromContext(ctx)
	switch n.Kind {
	case draw.NewsCreated:
		logger.Info("created allocation placeholder", "family", f, "placeholder", n.PH.Name, "pool", names.PoolName(s.class.Name))
		r.untell(s.claim, f)
		// Told only if MetalLB stays silent (awaitMetalLB).
		return awaitingMetalLB(metallbQuiet)
	case draw.NewsPinnedElsewhere:
		logger.Info("the placeholder is pinned to another address than MetalLB reports; waiting for MetalLB",
			"placeholder", n.PH.Name, "pinned", marks.Of(n.PH).Pin, "assigned", n.IP)
		return waitForMetalLB
	case draw.NewsEntryGoing:
		logger.Info("the address MetalLB assigned is recorded by an IPAddress being deleted; waiting for it to go",
			"family", f, "ip", n.IP, "ipaddress", n.Entry.Name)
		r.tell(s.claim, f, corev1.EventTypeNormal, ReasonWaitingForLedger, msgLedgerEntryGoing(f, n.IP, n.Entry))
		return s.waitOnClass("the IPAddress recording the assigned address to go", ledgerWait)
	case draw.NewsUnrecorded:
		// The claim changed (ensureAddress), or the ledger disagrees with
		// MetalLB (LedgerMismatch): either one's change brings it back.
		return phase.WaitFor("the claim or the ledger entry of the assigned address to change", 0)
	case draw.NewsGaveBack:
		// The claim draws again after a pause (Pauses), once every
		// address of the ledger is held (createPlaceholder).
		pause := r.pauses.GaveBack(memoKey(s.claim, f), n.IP, time.Now())
		r.Recorder.Event(s.claim, corev1.EventTypeNormal, ReasonLedgerAddressReturned, msgLedgerAddressReturned(f, n.IP, n.Entry))
		return phase.RetryAfter(pause, "gave an address back; drawing again after a pause")
	case draw.NewsHandedOver:
		// No Event: the core lists the address in the claim's status, and
		// a claim's Events are for what keeps it from Bound.
		logger.Info("recorded address", "family", f, "ip", n.Entry.Spec.Address, "ipaddress", n.Entry.Name, "placeholder", n.PH.Name)
		r.untell(s.claim, f)
		draw.AllocationsTotal.WithLabelValues(s.class.Name, string(f), draw.ResultRecorded).Inc()
	}
	return phase.Next()
}

// ensureAddress returns the IPAddress named addrName, creating it bound to
// the claim when it does not exist; the caller checks whose it is. It
// creates nothing, and returns nil, when the API server shows the claim
// gone, replaced or no longer naming the scope's class.
func (r *Reconciler) ensureAddress(ctx context.Context, s *scope, ip, addrName string) (*iadv1alpha1.IPAddress, error) {
	existing := &iadv1alpha1.IPAddress{}
	err := r.Get(ctx, types.NamespacedName{Name: addrName}, existing)
	if err == nil {
		return existing, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	// Creating records the address for the claim: ask the API server, not
	// a cache that may lag behind the claim's deletion or change of class.
	live := &iadv1alpha1.IPAddressClaim{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(s.claim), live); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if live.UID != s.claim.UID || !served(live) || className(live) != s.class.Name {
		log.FromContext(ctx).Info("the claim is gone or no longer names the class; not recording the address",
			"ip", ip, "class", s.class.Name)
		return nil, nil
	}
	a := draw.RenderAddress(s.claim, s.class, ip, addrName)
	created, err := patch.CreateAndWait(ctx, r.Client, r.APIReader, a, draw.CacheWait)
	switch {
	case created:
		log.FromContext(ctx).Info("created IPAddress", "ipaddress", addrName, "ip", ip)
		return a, err
	case err != nil:
		return nil, fmt.Errorf("create IPAddress %s: %w", addrName, err)
	}
	// Someone has it and the cache has not shown it yet: ask the API server.
	if err := r.APIReader.Get(ctx, types.NamespacedName{Name: addrName}, existing); err != nil {
		return nil, err
	}
	return existing, nil
}
