package service

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/patch"
	"github.com/cozystack/metallb-iad/internal/phase"
)

// statusWriter collects what a pass changes of its addresses' status and
// writes each address once, in one merge patch locked to the version the
// pass read (patch.StatusSince), as the ipaddress controller's report
// does. The phases set their changes on it; Reconcile writes them when
// the pass ends (endPass), and a phase whose next write must follow them
// (the association before the pin) flushes it at that point: no phase
// after it sets those addresses' status again, so that flush is still
// their one write of the pass. A metadata write of an address must not
// come between its set and its flush: it would read the status back over
// the change.
type statusWriter struct {
	pending map[string]*statusChange // by address name
	written map[string]bool          // the addresses this pass wrote
}

// statusChange is one address's pending change: the copy the pass changes
// and writes, that copy as the pass read it, and what to do once written.
type statusChange struct {
	addr, orig *iadv1alpha1.IPAddress
	then       []func()
}

// set applies change to a's status, and keeps then (its log line and
// Events; nil for none) to run once the write has landed. Two lists of
// one pass may each hold a copy of an address: the change is made on a
// and on the copy set first under its name, which is the one written.
func (w *statusWriter) set(a *iadv1alpha1.IPAddress, change func(*iadv1alpha1.IPAddressStatus), then func()) {
	if w.pending == nil {
		w.pending = map[string]*statusChange{}
	}
	c := w.pending[a.Name]
	if c == nil {
		c = &statusChange{addr: a, orig: a.DeepCopy()}
		w.pending[a.Name] = c
	}
	change(&a.Status)
	if c.addr != a {
		change(&c.addr.Status)
	}
	if then != nil {
		c.then = append(c.then, then)
	}
}

// due returns the pending changes that change something, in name order:
// two Services racing for a claim collide on its first address.
func (w *statusWriter) due() []*statusChange {
	var out []*statusChange
	for _, name := range slices.Sorted(maps.Keys(w.pending)) {
		if c := w.pending[name]; !equality.Semantic.DeepEqual(c.orig.Status, c.addr.Status) {
			out = append(out, c)
		}
	}
	return out
}

// flush writes what is due, each address once a pass, runs the writes'
// then in order, and forgets every pending change. An address gone from
// the API server needs no status: it is passed over and its NotFound
// returned once the others are written. Any other error stops the flush;
// what it did not write is dropped, and the next pass derives it again.
func (w *statusWriter) flush(ctx context.Context, c client.StatusClient) error {
	due := w.due()
	w.pending = nil
	var gone []error
	for _, ch := range due {
		name := ch.addr.Name
		if w.written[name] {
			return fmt.Errorf("the status of IPAddress %s was written already in this pass", name)
		}
		if w.written == nil {
			w.written = map[string]bool{}
		}
		w.written[name] = true
		if err := patch.StatusSince(ctx, c, ch.addr, ch.orig); err != nil {
			if apierrors.IsNotFound(err) {
				gone = append(gone, err)
				continue
			}
			return err
		}
		for _, then := range ch.then {
			then()
		}
	}
	return errors.Join(gone...)
}

// endPass ends a pass: the status its phases changed is written
// (writeStatus) whether they ran to the end, stopped or failed, as each
// write landed where it was made before. A lost race is requeued as any
// phase's (phase.Run).
func (r *Reconciler) endPass(ctx context.Context, s *scope, res ctrl.Result, err error) (ctrl.Result, error) {
	after, werr := phase.Run(ctx, s, phase.Of(r.writeStatus))
	if werr != nil {
		err = errors.Join(err, werr)
	}
	return patch.Sooner(res, after), err
}

// writeStatus writes what the pass left pending of its addresses' status.
func (r *Reconciler) writeStatus(ctx context.Context, s *scope) (phase.Result, error) {
	return phase.Next(), s.status.flush(ctx, r)
}
