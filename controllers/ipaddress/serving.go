package ipaddress

import (
	"context"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/ipaddress/hold"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/phase"
	"github.com/cozystack/metallb-iad/internal/stale"
)

// checkServing keeps the address from saying attached while MetalLB
// refuses the Service it is attached to: AttachmentServed goes False, with
// Warnings, once MetalLB refused the pinned Service (judgeRefusal), stays
// False while the Service holds none of the address, and goes True once
// it holds it or is detached. A Service that holds the address costs no
// read beyond the cache.
func (r *Reconciler) checkServing(ctx context.Context, s *scope) (phase.Result, error) {
	a, ip := s.Addr, s.IP.String()
	svc, err := r.AttachedService(ctx, &s.Scope)
	if err != nil {
		return phase.Next(), err
	}
	prev := meta.FindStatusCondition(a.Status.Conditions, conditions.AttachmentServed)
	key, refused, unserved := "", "", false
	res := phase.Next()
	if svc != nil && pinnedTo(svc, ip) {
		key = svc.Namespace + "/" + svc.Name
		unserved = !marks.Holds(svc, ip)
	}
	switch {
	case !unserved:
		r.unserved.forget(a.Name)
	case refusedFor(prev, key):
		// Said already; the Service's next change brings the address back.
		res = phase.WaitFor("the refused Service to change", 0)
	case a.Status.Phase == iadv1alpha1.AddressLost:
		// MetalLB no longer has the address: AddressLost says so.
	default:
		if refused, res, err = r.judgeRefusal(ctx, s, svc); err != nil {
			return phase.Next(), err
		}
	}
	v := planServing(prev, ip, key, refused, unserved)
	if !v.set {
		return res, nil
	}
	conditions.Set(&a.Status.Conditions, conditions.AttachmentServed, v.status, v.reason, v.message, a.Generation)
	if v.warn {
		log.FromContext(ctx).Info("MetalLB refused the Service the address is attached to", "service", key, "metallb", refused)
		s.AfterPatch = append(s.AfterPatch, hold.Event{Object: a, Type: corev1.EventTypeWarning, Reason: ReasonAttachmentRefused, Message: v.message})
		s.AfterPatch = append(s.AfterPatch, hold.Event{Object: svc, Type: corev1.EventTypeWarning, Reason: ReasonAttachmentRefused, Message: v.message})
	}
	return res, nil
}

// judgeRefusal returns MetalLB's refusal of the attached Service, pinned
// to the address and holding none of it, and when to look again. It is
// judged only from what MetalLB said about a version of the Service that
// carries the driver's grant (written with the pin once the address is
// released to it, so MetalLB can give it), once MetalLB has had time to
// look (servingSettle and one full pass): a refusal of that version or a
// later one, or a repeat, since, of a refusal first said about an earlier
// version (stale.RefusalOf), then by the Services it names
// (judgeRefusalNow). A refusal MetalLB said before the pin (a
// fresh Service it had no address for) or before the address was released
// (a hand pin) is no refusal of the attachment. Where only such earlier
// refusals are on record, the Service is handed back to MetalLB once
// (stale.Poke), so that a refusal of the pin, if any, is said again.
func (r *Reconciler) judgeRefusal(ctx context.Context, s *scope, svc *corev1.Service) (string, phase.Result, error) {
	a := s.Addr
	if !marks.Of(svc).Granted(a.Spec.ClassName) {
		return "", phase.WaitFor("the Service controller to grant the attached Service", 0), nil
	}
	u := r.unserved.get(a.Name, svc.UID)
	look := servingSettle + stale.PassTime(r.Allocated.Count())
	if wait := look - time.Since(u.since); wait > 0 {
		return "", phase.RetryAfter(wait, "MetalLB may not have looked at the pinned Service yet"), nil
	}
	var evs corev1.EventList
	if err := r.APIReader.List(ctx, &evs, client.InNamespace(svc.Namespace),
		client.MatchingFields{"involvedObject.name": svc.Name, "reason": stale.AllocationFailed}); err != nil {
		return "", phase.Next(), err
	}
	got := stale.RefusalOf(evs.Items, svc.UID, svc.ResourceVersion, u.earlier)
	if got.Event != nil {
		return r.judgeRefusalNow(ctx, s, svc, u, got, look)
	}
	switch {
	case got.Ahead:
		return "", phase.WaitFor("the cache to show the version of the Service MetalLB refused", lookAgain), nil
	case len(got.Earlier) > 0 && u.earlier == nil:
		u.earlier = got.Earlier
		if err := stale.Poke(ctx, r, svc); err != nil {
			return "", phase.Next(), err
		}
		return "", phase.RetryAfter(look, "MetalLB was asked to look at the pinned Service again"), nil
	}
	// MetalLB's Event may come after the status change that woke this
	// pass, and Events wake nothing here.
	return "", phase.RetryAfter(servingRecheck, "MetalLB may not have refused the attached Service yet"), nil
}

// judgeRefusalNow returns MetalLB's refusal of the attached Service as a
// standing one, or waits while the refusal names only the address's own
// placeholders and one of them still holds it, or, once every Service it
// names has let go of the address, hands the Service back to MetalLB
// (stale.Poke), once per refusal: MetalLB saying it again after that
// stands.
func (r *Reconciler) judgeRefusalNow(ctx context.Context, s *scope, svc *corev1.Service, u *unservedAttachment, got stale.Refusal, look time.Duration) (string, phase.Result, error) {
	e := got.Event
	placeholders, err := r.CachedPlaceholders(ctx, s.Addr)
	if err != nil {
		return "", phase.Next(), err
	}
	holders, err := r.Holders(ctx, &s.Scope)
	if err != nil {
		return "", phase.Next(), err
	}
	switch refusalByHolders(e.Message, s.IP.String(), keysOf(placeholders), keysOf(holders), marks.SharesHold(svc, s.Key)) {
	case refusalPassing:
		return "", phase.RetryAfter(look, "MetalLB refused the pinned Service while a placeholder of the address held it, which is letting go"), nil
	case refusalOutdated:
		// A refusal on u.earlier was taken when MetalLB was last asked
		// (here or for an earlier version): said more often since, it
		// stands; said as often, the cache is behind the ask.
		said, asked := u.earlier[e.Name]
		if asked && stale.Said(e) > said {
			break
		}
		if !asked {
			if err := stale.Poke(ctx, r, svc); err != nil {
				return "", phase.Next(), err
			}
			// Judged from now on only if said again (stale.RefusalOf).
			u.earlier = maps.Clone(got.Earlier)
			if u.earlier == nil {
				u.earlier = map[string]int32{}
			}
			u.earlier[e.Name] = stale.Said(e)
		}
		return "", phase.RetryAfter(look, "MetalLB was asked to look at the pinned Service again: what it refused is free now"), nil
	}
	return e.Message, phase.Next(), nil
}

// keysOf names svcs.
func keysOf(svcs []corev1.Service) []types.NamespacedName {
	out := make([]types.NamespacedName, len(svcs))
	for i := range svcs {
		out[i] = client.ObjectKeyFromObject(&svcs[i])
	}
	return out
}

// servingSettle is how long an attached, pinned Service may hold nothing
// before MetalLB's Events about it are read: MetalLB gives a Service it
// can serve its pin in milliseconds, beyond the full pass it may be in.
const servingSettle = 2 * time.Second

// servingRecheck is how soon an attached, pinned Service that holds
// nothing and has no refusal on record is looked at again.
const servingRecheck = 10 * time.Second

// unservedAttachments remembers, per address, since when its attached
// Service (by uid) has been seen pinned and holding nothing, and the
// earlier refusals on record when it was handed back to MetalLB. Losing it
// delays a verdict; it never makes one.
type unservedAttachments struct{ m sync.Map }

type unservedAttachment struct {
	uid     types.UID
	since   time.Time
	earlier map[string]int32
}

// get returns the record of the address's attachment to uid, started now
// if there is none (or one of another Service). One pass at a time works
// on an address, so the record is the pass's own.
func (u *unservedAttachments) get(address string, uid types.UID) *unservedAttachment {
	if v, ok := u.m.Load(address); ok && v.(*unservedAttachment).uid == uid {
		return v.(*unservedAttachment)
	}
	rec := &unservedAttachment{uid: uid, since: time.Now()}
	u.m.Store(address, rec)
	return rec
}

func (u *unservedAttachments) forget(address string) { u.m.Delete(address) }
