// Package phase is the reconcile skeleton the driver's controllers share.
// A pass fetches its object, builds a scope, and hands the scope to Run with
// the controller's phases in order; Run folds what each phase reports into
// the pass's result, so requeues and conflicts are decided in one place.
package phase

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cozystack/metallb-iad/internal/patch"
)

// ConflictRetry is how soon a pass that lost an optimistic-lock race looks
// again. The newer version's own watch event usually brings the object back
// first; the requeue is the safety net, short because handoffs wait on it.
const ConflictRetry = 100 * time.Millisecond

// State names what a phase left for later.
type State int

const (
	// Done: nothing is left for this phase; the next one runs.
	Done State = iota
	// Waiting: the phase waits for a change another process makes (MetalLB,
	// another controller, the cache catching up), which a watch brings
	// back; the next one runs. After, when set, is a fallback look. Run logs
	// every wait, by phase and reason: a pass that waits says so.
	Waiting
	// Requeue: the phase wants another look after After, because time
	// itself decides (a settle period, a retry of a refused write) and no
	// watch event will come; the next one runs. Logged at debug level.
	Requeue
	// Stop: the pass ends here; later phases must not act on what this one
	// saw (for example it wrote and the cache has not shown the write).
	Stop
)

func (s State) String() string {
	switch s {
	case Done:
		return "Done"
	case Waiting:
		return "Waiting"
	case Requeue:
		return "Requeue"
	case Stop:
		return "Stop"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Result is what one phase reports: its state, the delay of its next look
// (0: none) and, for anything but Done, why, in a few words for the log.
type Result struct {
	State  State
	After  time.Duration
	Reason string
	// waits: a Stop that waits for another process's write (HaltFor),
	// logged as a wait.
	waits bool
}

// Next is the result of a phase with nothing left to do.
func Next() Result { return Result{} }

// WaitFor is the result of a phase that waits for a watch event; fallback,
// when not 0, is a look after that long in case no event comes.
func WaitFor(reason string, fallback time.Duration) Result {
	return Result{State: Waiting, After: fallback, Reason: reason}
}

// RetryAfter is the result of a phase that wants another look after d.
func RetryAfter(d time.Duration, reason string) Result {
	return Result{State: Requeue, After: d, Reason: reason}
}

// Halt is the result of a phase that ends the pass; after, when not 0, is
// when to look again.
func Halt(reason string, after time.Duration) Result {
	return Result{State: Stop, After: after, Reason: reason}
}

// HaltFor is the result of a phase that ends the pass because it waits for
// a change another process makes (as WaitFor, but later phases must not
// run); fallback, when not 0, is a look after that long.
func HaltFor(reason string, fallback time.Duration) Result {
	return Result{State: Stop, After: fallback, Reason: reason, waits: true}
}

// Phase is one named step of a controller's pass over its scope S.
type Phase[S any] struct {
	Name string
	Run  func(context.Context, S) (Result, error)
}

// Of is the phase of a method value, named after the method, so a phase in
// the logs is found in the code by its name.
func Of[S any](run func(context.Context, S) (Result, error)) Phase[S] {
	return Phase[S]{Name: methodName(run), Run: run}
}

// methodName is the name of the function or method f (r.admit: "admit").
func methodName(f any) string {
	name := runtime.FuncForPC(reflect.ValueOf(f).Pointer()).Name()
	name = strings.TrimSuffix(name, "-fm")
	if i := strings.LastIndex(name, "."); i >= 0 {
		name = name[i+1:]
	}
	return name
}

// Run runs the phases in order over s and folds their results: the
// earliest requeue wins; a Stop or an error ends the pass. A pass whose
// error is an optimistic-lock conflict acted on a stale read, so it is
// requeued after ConflictRetry instead of failing; any other error goes to
// the workqueue's backoff.
func Run[S any](ctx context.Context, s S, phases ...Phase[S]) (ctrl.Result, error) {
	var res ctrl.Result
	for _, p := range phases {
		r, err := p.Run(ctx, s)
		if err != nil {
			return onConflict(ctx, res, fmt.Errorf("%s: %w", p.Name, err))
		}
		logResult(ctx, p.Name, r)
		res = patch.Sooner(res, ctrl.Result{RequeueAfter: r.After})
		if r.State == Stop {
			break
		}
	}
	return res, nil
}

// logResult logs what a phase left for later: a wait always, by name and
// reason; a requeue or a stop at debug level.
func logResult(ctx context.Context, name string, r Result) {
	switch {
	case r.State == Done:
	case r.State == Waiting || r.waits:
		log.FromContext(ctx).Info("waiting", "phase", name, "for", r.Reason, "fallback", r.After)
	default:
		log.FromContext(ctx).V(1).Info("phase", "phase", name, "state", r.State.String(), "reason", r.Reason, "after", r.After)
	}
}
