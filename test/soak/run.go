package soak

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/test/cluster"
)

// Replicas is how many processes of each controller the soak runs.
const Replicas = 2

// Report is what one soak run did and found.
type Report struct {
	Seed        int64
	Ops         int
	OpsByKind   map[string]int
	OpErrors    map[string]int
	Kills       map[string]int
	FaultErrors []string
	Storm       time.Duration
	// Converged is false when the final invariants did not all hold within
	// the convergence bound; ConvergeTime is then that bound.
	Converged    bool
	ConvergeTime time.Duration
	// Quiet is the length of the window without any write asked for;
	// QuietTime is how long after the storm the first such window ended.
	Quiet      time.Duration
	QuietTime  time.Duration
	Checks     map[string]int
	Violations []Violation
	Findings   []Finding
	Unquiet    []string
	// Stretches are the run's fault stretches and fault-free ones, each
	// with its Warnings by reason and how many nothing explains.
	Stretches []string
	// Unexplained are the driver's Warnings nothing in the storm explains.
	Unexplained []string
	// OtherWarnings counts the Warnings of others (MetalLB), by source and
	// reason.
	OtherWarnings map[string]int
	// Unchecked are the invariants that made no check.
	Unchecked []string
}

// Invariants is every invariant the soak checks that must make at least
// one check in a run, or the run did not test it. FinalSharedHold is not
// among them: the soak's stack installs the parking pool for both
// families, as the chart does, and a parked attachment is never a shared
// one; it counts where a run has one.
var Invariants = []string{
	CheckDoubleHold, CheckIPStable, CheckOneAddress, CheckClaimKeeps, CheckLostWarned, CheckRetainLives, CheckWarnings,
	FinalHeld, FinalAttached, FinalOrphans, FinalMarkers, FinalLeak, FinalDoubleHold, FinalPhases,
	FinalRetain, FinalAttachLives, FinalQuiet, FinalWarm,
}

// Failures counts every violation, final finding, unquiet object,
// unexplained Warning and invariant that made no check.
func (r *Report) Failures() int {
	return len(r.Violations) + len(r.Findings) + len(r.Unquiet) + len(r.Unexplained) + len(r.Unchecked)
}

// Run starts the whole stack, runs the storm with the watcher on, lets the
// system converge and checks the final invariants. It prints progress and
// the report to out.
func Run(ctx context.Context, cfg Config, out io.Writer) (*Report, error) {
	say := func(format string, args ...any) { fmt.Fprintf(out, "soak: "+format+"\n", args...) }
	say("seed %d (replay the same mix with SOAK_SEED=%d); %d operations, %d kills, %d API server restarts, storm at most %s",
		cfg.Seed, cfg.Seed, cfg.Ops, cfg.Kills, cfg.APIRestarts, cfg.Duration)
	t0 := time.Now()
	s, err := cluster.StartStack(ctx, cluster.StackOptions{Replicas: Replicas, ReplicaArgs: cluster.FastFailoverArgs})
	if err != nil {
		return nil, err
	}
	defer s.Stop()
	say("stack up in %s: control plane, MetalLB, reference core, %d replicas of each controller; logs in %s",
		time.Since(t0).Round(time.Millisecond), Replicas, s.Dir)

	kcfg := rest.CopyConfig(s.Config)
	kcfg.QPS, kcfg.Burst = -1, 0
	k, err := client.New(kcfg, client.Options{Scheme: bootstrap.Scheme()})
	if err != nil {
		return nil, err
	}
	if err := setup(ctx, s, k); err != nil {
		return nil, err
	}
	tally := newTally()
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	w, err := NewWatcher(wctx, s.Config, cluster.DriverNamespace, cfg.Grace, tally)
	if err != nil {
		return nil, err
	}

	st := newStorm(cfg, k, s, say)
	w.Follow(st.History)
	t1 := time.Now()
	st.run(ctx)
	rep := &Report{Seed: cfg.Seed, Ops: st.Ops(), OpsByKind: st.ops, OpErrors: st.opErrors, Kills: st.kills,
		FaultErrors: st.fErrs, Storm: time.Since(t1)}
	say("storm done: %d operations and %d faults in %s", rep.Ops, sum(st.kills), rep.Storm.Round(time.Millisecond))

	for _, e := range st.fErrs {
		say("fault error: %s", e)
	}
	if err := st.restore(ctx, Replicas); err != nil {
		return nil, fmt.Errorf("bring the processes back: %w", err)
	}
	if err := retry(ctx, func() error { return st.cleanup(ctx) }); err != nil {
		return nil, fmt.Errorf("remove the storm's causes: %w", err)
	}
	t2 := time.Now()
	var checks map[string]int
	lastSaid := t2
	for {
		state, err := ListState(ctx, k)
		if err == nil {
			checks, rep.Findings = CheckFinal(state, cluster.DriverNamespace, w.Retained())
			n, warm := CheckWarm(state, st.warmClasses())
			checks[FinalWarm] += n
			rep.Findings = append(rep.Findings, warm...)
			if len(rep.Findings) == 0 {
				rep.Converged = true
				break
			}
			// What convergence still waits for, every 20 s: where a slow
			// convergence spends its time.
			if time.Since(lastSaid) >= 20*time.Second {
				lastSaid = time.Now()
				f := rep.Findings[0]
				say("converging for %s, %d findings left; first: %s: %s", time.Since(t2).Round(time.Second), len(rep.Findings), f.Kind, f.Detail)
			}
		}
		if time.Since(t2) > cfg.Converge {
			break
		}
		time.Sleep(2 * time.Second)
	}
	rep.ConvergeTime = time.Since(t2)
	if !rep.Converged {
		if state, err := ListState(ctx, k); err == nil {
			for _, line := range Describe(state) {
				say("at the end: %s", line)
			}
			// Where MetalLB said it put each address of the soak's classes.
			var evs corev1.EventList
			if err := k.List(ctx, &evs, client.MatchingFields{"reason": "IPAllocated"}); err == nil {
				for _, e := range evs.Items {
					for _, part := range strings.Split(e.Message, `"`) {
						if Universe(part) {
							say("at the end: MetalLB assigned %s to %s/%s (last %s)", part, e.InvolvedObject.Namespace, e.InvolvedObject.Name, e.LastTimestamp.Format(time.TimeOnly))
						}
					}
				}
			}
		}
	}
	w.Finish()
	warnings, others := w.Warnings()
	history := append(st.History(), stormEvent{Kind: "cleanup", Start: t1.Add(rep.Storm), End: t2})
	parts, unexplained := judgeWarnings(warnings, history, t1, time.Now())
	for _, p := range parts {
		rep.Stretches = append(rep.Stretches, p.describe(t1))
	}
	rep.Unexplained, rep.OtherWarnings = unexplained, others
	tally.mu.Lock()
	tally.Checks[CheckWarnings] += len(parts)
	tally.mu.Unlock()
	if rep.Converged {
		// Nothing may keep being rewritten: within the convergence bound,
		// some Quiet-long window must see no write at all. One window is
		// not asked to be the first: MetalLB rewrites its pools' status
		// counters on every full pass over the Services, even when no
		// assignment changes (Allocator.Assign unassigns and assigns
		// again, and each step reports the counters), and its retries of
		// an earlier failed pass still fire, further and further apart,
		// for a while after the storm.
		for {
			unquiet, err := quiet(ctx, k, cfg.Quiet)
			if err != nil {
				return nil, err
			}
			rep.Unquiet = unquiet
			if len(unquiet) == 0 || time.Since(t2) > cfg.Converge {
				break
			}
		}
		rep.Quiet, rep.QuietTime = cfg.Quiet, time.Since(t2)
	}
	wcancel()
	rep.Checks = map[string]int{}
	tally.mu.Lock()
	for kind, n := range tally.Checks {
		rep.Checks[kind] = n
	}
	rep.Violations = append([]Violation(nil), tally.Violations...)
	tally.mu.Unlock()
	for kind, n := range checks {
		rep.Checks[kind] += n
	}
	if rep.Converged {
		rep.Checks[FinalQuiet]++
	}
	for _, kind := range Invariants {
		if rep.Checks[kind] == 0 {
			rep.Checks[kind] = 0
			rep.Unchecked = append(rep.Unchecked, kind)
		}
	}
	rep.Print(out)
	return rep, nil
}

// setup creates the namespaces and the classes, and waits until MetalLB
// has loaded every pool.
func setup(ctx context.Context, s *cluster.Stack, k client.Client) error {
	for _, ns := range append(append([]string{}, Tenants...), Rogue) {
		if err := s.EnsureNamespace(ctx, ns); err != nil {
			return err
		}
	}
	for _, c := range allClasses() {
		if err := k.Create(ctx, c.Object(c.Wide, c.Warm)); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for _, c := range allClasses() {
		for {
			pool := &metallbv1beta1.IPAddressPool{}
			err := k.Get(ctx, client.ObjectKey{Namespace: cluster.MetalLBNamespace, Name: names.PoolName(c.Name)}, pool)
			if err == nil && pool.Status.AvailableIPv4 > 0 && pool.Status.AvailableIPv6 > 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("pool of class %s not loaded by MetalLB: %v", c.Name, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// retry runs f until it succeeds, for a minute (the API server may be
// coming back from a restart).
func retry(ctx context.Context, f func() error) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(time.Second)
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func metaItems(l client.ObjectList) ([]metav1Object, error) {
	objs, err := meta.ExtractList(l)
	if err != nil {
		return nil, err
	}
	out := make([]metav1Object, 0, len(objs))
	for _, o := range objs {
		a, err := meta.Accessor(o)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

type metav1Object interface {
	GetNamespace() string
	GetName() string
	GetResourceVersion() string
	GetGeneration() int64
}

// Print writes the report as tables.
func (r *Report) Print(out io.Writer) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	defer w.Flush()
	fmt.Fprintf(w, "\nsoak report (seed %d)\n", r.Seed)
	fmt.Fprintf(w, "operations\t%d in %s\n", r.Ops, r.Storm.Round(time.Millisecond))
	for _, k := range sortedKeys(r.OpsByKind) {
		fmt.Fprintf(w, "  %s\t%d\t(%d refused or failed)\n", k, r.OpsByKind[k], r.OpErrors[k])
	}
	fmt.Fprintf(w, "faults\t%d\n", sum(r.Kills))
	for _, k := range sortedKeys(r.Kills) {
		fmt.Fprintf(w, "  %s\t%d\n", k, r.Kills[k])
	}
	for _, e := range r.FaultErrors {
		fmt.Fprintf(w, "  fault error\t%s\n", e)
	}
	byKind := map[string]int{}
	for _, v := range r.Violations {
		byKind[v.Kind]++
	}
	for _, f := range r.Findings {
		byKind[f.Kind]++
	}
	if len(r.Unquiet) > 0 {
		byKind[FinalQuiet] = len(r.Unquiet)
	}
	byKind[CheckWarnings] += len(r.Unexplained)
	fmt.Fprintf(w, "invariant\tchecks\tviolations\n")
	for _, k := range sortedKeys(r.Checks) {
		fmt.Fprintf(w, "  %s\t%d\t%d\n", k, r.Checks[k], byKind[k])
	}
	if r.Converged {
		fmt.Fprintf(w, "converged\tin %s after the storm (nothing rewritten for %s by %s)\n", r.ConvergeTime.Round(time.Millisecond),
			r.Quiet, r.QuietTime.Round(time.Millisecond))
	} else {
		fmt.Fprintf(w, "converged\tNO: final invariants still broken after %s\n", r.ConvergeTime.Round(time.Millisecond))
	}
	fmt.Fprintf(w, "violations\t%d\n", r.Failures())
	const show = 40
	n := 0
	for _, v := range r.Violations {
		if n++; n <= show {
			fmt.Fprintf(w, "  during the storm, %s: %s\n", v.Kind, v.Detail)
		}
	}
	for _, f := range r.Findings {
		if n++; n <= show {
			fmt.Fprintf(w, "  at rest, %s: %s\n", f.Kind, f.Detail)
		}
	}
	if len(r.Unquiet) > 0 {
		fmt.Fprintf(w, "  still rewritten after convergence: %s\n", strings.Join(r.Unquiet, ", "))
	}
	if n > show {
		fmt.Fprintf(w, "  ... and %d more\n", n-show)
	}
	for _, kind := range r.Unchecked {
		fmt.Fprintf(w, "  invariant %s made no check: the run did not test it\n", kind)
	}
	w.Flush()
	fmt.Fprintf(out, "warnings by stretch (seconds from the storm's start):\n")
	for _, s := range r.Stretches {
		fmt.Fprintf(out, "  %s\n", s)
	}
	for i, u := range r.Unexplained {
		if i == show {
			fmt.Fprintf(out, "  ... and %d more unexplained\n", len(r.Unexplained)-show)
			break
		}
		fmt.Fprintf(out, "  unexplained Warning: %s\n", u)
	}
	for _, k := range sortedKeys(r.OtherWarnings) {
		fmt.Fprintf(out, "  Warnings of others: %s %d\n", k, r.OtherWarnings[k])
	}
}

func sortedKeys(m map[string]int) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
