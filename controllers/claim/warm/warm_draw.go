package warm

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim/draw"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/patch"
	"github.com/cozystack/metallb-iad/internal/phase"
	"github.com/cozystack/metallb-iad/internal/placeholder"
)

// warmDraw is a class's family as the owner of a draw: its placeholders
// are named by the API server, its addresses recorded Available (no
// claimRef), and what happens is told on the class.
type warmDraw struct {
	w *warmer
	c *iadv1alpha1.IPAddressClass
	f iadv1alpha1.IPFamily
}

// draw is the warm draw of family f for the scope's class.
func (w *warmer) draw(s *warmScope, f iadv1alpha1.IPFamily) draw.Draw {
	return draw.Draw{Deps: w.Deps, Owner: warmDraw{w: w, c: s.class, f: f}, Class: s.name, F: f, What: "warm placeholder"}
}

func (d warmDraw) Placeholder() *corev1.Service {
	return draw.RenderWarmPlaceholder(d.w.PlaceholderNamespace, d.c.Name, d.f)
}

// Judge reads the entry by name; a miss in the cache is confirmed with the
// API server, so a lagging cache never lets a warm placeholder take an
// address the ledger records. An address recorded for someone else (an
// attached address is unheld for a moment during a gap handoff, and
// MetalLB may hand it out) is given back; one being torn down is waited for.
func (d warmDraw) Judge(ctx context.Context, _, addrName string) (draw.LedgerAnswer, *iadv1alpha1.IPAddress, error) {
	a := &iadv1alpha1.IPAddress{}
	err := d.w.Get(ctx, types.NamespacedName{Name: addrName}, a)
	if apierrors.IsNotFound(err) {
		err = d.w.APIReader.Get(ctx, types.NamespacedName{Name: addrName}, a)
	}
	switch {
	case apierrors.IsNotFound(err):
		return draw.LedgerFree, nil, nil
	case err != nil:
		return draw.LedgerFree, nil, err
	case a.DeletionTimestamp != nil:
		return draw.LedgerGoing, a, nil
	case !isOurWarm(a, d.c.Name):
		return draw.LedgerTaken, a, nil
	}
	return draw.LedgerOurs, a, nil
}

// RecordEntry labels and pins the placeholder, without a sharing key (as a
// claim's: the claim the address is bound to later gets a key on its hold
// only for a shared handoff), then creates the Available IPAddress unless
// judge found it.
func (d warmDraw) RecordEntry(ctx context.Context, ph *corev1.Service, ip, addrName string, entry *iadv1alpha1.IPAddress) (draw.LedgerAnswer, *iadv1alpha1.IPAddress, error) {
	if ph.Labels[marks.LabelAddress] != addrName || marks.Of(ph).Pin != ip {
		if err := patch.Meta(ctx, d.w.Client, ph, func() {
			ph.Labels[marks.LabelAddress] = addrName
			marks.Edit(ph, func(m *marks.Marks) { m.Pin = ip })
		}); err != nil {
			return draw.LedgerFree, nil, fmt.Errorf("pin warm placeholder %s to %s: %w", ph.Name, ip, err)
		}
	}
	if entry != nil {
		return draw.LedgerOurs, entry, nil
	}
	a := draw.RenderWarmAddress(d.c, ip, addrName)
	switch created, err := patch.CreateAndWait(ctx, d.w.Client, d.w.APIReader, a, draw.CacheWait); {
	case !created && err == nil:
		return draw.LedgerFree, nil, nil // someone was faster: the next pass asks the ledger again
	case !created:
		return draw.LedgerFree, nil, fmt.Errorf("create warm IPAddress %s: %w", addrName, err)
	case err != nil:
		return draw.LedgerFree, nil, err
	}
	d.w.Recorder.Event(d.c, corev1.EventTypeNormal, ReasonWarmRecorded, msgWarmRecorded(d.f, ip, addrName))
	draw.AllocationsTotal.WithLabelValues(d.c.Name, string(d.f), draw.ResultWarm).Inc()
	return draw.LedgerOurs, a, nil
}

// HandOver makes the placeholder the hold placeholder of a, owned by it.
func (d warmDraw) HandOver(ph *corev1.Service, a *iadv1alpha1.IPAddress) func() {
	return func() {
		if !placeholder.OwnedByAddress(ph, a.Name) {
			ph.OwnerReferences = append(ph.OwnerReferences, placeholder.OwnerRef(a))
		}
		ph.Labels[marks.LabelPlaceholder] = names.PlaceholderHold
	}
}

// Report logs and records what happened to a warm draw, and says what
// the class waits for: MetalLB, an entry being torn down, or the cache
// to show the IPAddress someone else recorded meanwhile.
func (d warmDraw) Report(ctx context.Context, n draw.News) phase.Result {
	logger := log.FromContext(ctx)
	switch n.Kind {
	case draw.NewsCreated:
		logger.V(1).Info("created warm placeholder", "class", d.c.Name, "family", d.f, "placeholder", n.PH.Name)
		return warmWaitForMetalLB
	case draw.NewsPinnedElsewhere:
		return warmWaitForMetalLB
	case draw.NewsEntryGoing:
		logger.V(1).Info("the address MetalLB gave a warm placeholder is still being torn down; waiting",
			"placeholder", n.PH.Name, "ipaddress", n.Entry.Name)
		return phase.WaitFor("the IPAddress recording the assigned address to go", 0)
	case draw.NewsUnrecorded:
		return phase.WaitFor("the cache to show the IPAddress recorded meanwhile", 0)
	case draw.NewsGaveBack:
		d.w.pauses.GaveBack(warmKey(d.c.Name, d.f), n.IP, time.Now())
		d.w.Recorder.Event(d.c, corev1.EventTypeNormal, ReasonWarmReturned, msgWarmReturned(d.f, n.IP, n.Entry))
	case draw.NewsHandedOver:
		logger.Info("recorded warm address", "class", d.c.Name, "family", d.f, "ip", n.IP, "ipaddress", n.Entry.Name)
	}
	return phase.Next()
}
