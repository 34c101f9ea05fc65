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

// State is what Run does after a phase.
type State int

const (
	// Done: nothing is left for this phase; the next one runs.
	Done State = iota
	// Waiting: something is left for later, and the next phase runs. After,
	// when set, is the next look: a fallback where another process's write
	// (MetalLB, another controller, the cache catching up) brings the
	// object back through a watch, the look itself where time decides (a
	// settle period, a retry of a refused write).
	Waiting
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
	case Stop:
		return "Stop"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Result is what one phase reports: what Run does next (State), the delay
// of its next look (0: none) and, for anything but Done, why, in a few
// words for the log.
type Result struct {
	State  State
	After  time.Duration
	Reason string
	// waits: the phase waits for another process's write (WaitFor,
	// HaltFor), logged at info level as a wait; otherwise at debug level.
	waits bool
}

// Next is the result of a phase with nothing left to do.
func Next() Result { return Result{} }

// WaitFor is the result of a phase that waits for another process's write,
// which a watch brings back; fallback, when not 0, is a look after that
// long in case no event comes.
func WaitFor(what string, fallback time.Duration) Result {
	return Result{State: Waiting, After: fallback, Reason: what, waits: true}
}

// RetryAfter is the result of a phase that wants another look after d,
// because time itself decides and no watch event will come.
func RetryAfter(d time.Duration, why string) Result {
	return Result{State: Waiting, After: d, Reason: why}
}

// Halt is the result of a phase that ends the pass; after, when not 0, is
// when to look again.
func Halt(why string, after time.Duration) Result {
	return Result{State: Stop, After: after, Reason: why}
}

// HaltFor is the result of a phase that ends the pass because it waits for
// another process's write (as WaitFor, but later phases must not run);
// fallback, when not 0, is a look after that long.
func HaltFor(what string, fallback time.Duration) Result {
	return Result{State: Stop, After: fallback, Reason: what, waits: true}
}

// First is the first of results that leaves something for later; Next
// when none does. A phase that takes several steps reports the first wait.
func First(results ...Result) Result {
	for _, r := range results {
		if r.State != Done {
			return r
		}
	}
	return Next()
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

// Part is the phase of a room's own scope P inside the controller's scope
// S (a scope that embeds the hold's): run, named after its method, on
// what part takes out of the pass's scope.
func Part[S, P any](part func(S) P, run func(context.Context, P) (Result, error)) Phase[S] {
	return Phase[S]{Name: methodName(run), Run: func(ctx context.Context, s S) (Result, error) { return run(ctx, part(s)) }}
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

// Fold runs phases over s as one phase of a larger pass (a claim's
// family): in order, until a Stop or an error (named after its phase); it
// returns the first result that leaves something for later (First), which
// the enclosing phase reports and Run logs.
func Fold[S any](ctx context.Context, s S, phases ...Phase[S]) (Result, error) {
	results := make([]Result, 0, len(phases))
	for _, p := range phases {
		r, err := p.Run(ctx, s)
		if err != nil {
			return Next(), fmt.Errorf("%s: %w", p.Name, err)
		}
		results = append(results, r)
		if r.State == Stop {
			break
		}
	}
	return First(results...), nil
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

// logResult logs what a phase left for later: a wait for another process
// always, by name and what it waits for; anything else at debug level.
func logResult(ctx context.Context, name string, r Result) {
	switch {
	case r.State == Done:
	case r.waits:
		log.FromContext(ctx).Info("waiting", "phase", name, "for", r.Reason, "fallback", r.After)
	default:
		log.FromContext(ctx).V(1).Info("phase", "phase", name, "state", r.State.String(), "reason", r.Reason, "after", r.After)
	}
}
