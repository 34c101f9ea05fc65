package service

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cozystack/metallb-iad/internal/phase"
)

// StallAfter is how long an attach may wait before the Service says why
// (ReasonAttachStalled): whatever holds it up, a stall is never silent.
const StallAfter = time.Minute

// stalls remembers, per Service, since when its attach has been waiting
// and whether that was said. Like handoffs it decides nothing: a
// controller that restarts starts the minute again.
type stalls struct {
	mu sync.Mutex
	m  map[types.NamespacedName]*stall
}

type stall struct {
	uid    types.UID
	since  time.Time
	warned bool
}

// see returns since when the Service's attach has been waiting (now, at
// the first sight) and whether that was said already.
func (st *stalls) see(key types.NamespacedName, uid types.UID, now time.Time) (since time.Time, warned bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.m == nil {
		st.m = map[types.NamespacedName]*stall{}
	}
	e := st.m[key]
	if e == nil || e.uid != uid {
		e = &stall{uid: uid, since: now}
		st.m[key] = e
	}
	return e.since, e.warned
}

// said records that the stall was said.
func (st *stalls) said(key types.NamespacedName) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if e := st.m[key]; e != nil {
		e.warned = true
	}
}

// forget drops a Service whose attach is done, or that attaches nothing.
func (st *stalls) forget(key types.NamespacedName) {
	st.mu.Lock()
	defer st.mu.Unlock()
	delete(st.m, key)
}

// stallDue decides, for an attach waiting since since: whether to say so
// now, and when to look again if the minute has not passed (0: no look).
func stallDue(since, now time.Time, warned bool, limit time.Duration) (warn bool, after time.Duration) {
	waited := now.Sub(since)
	switch {
	case warned:
		return false, 0
	case waited >= limit:
		return true, 0
	default:
		return false, limit - waited
	}
}

// reportStall is the last phase: an attach the pass left waiting (attach
// set waitingFor) for StallAfter gets one Warning saying what it waits
// for; a pass that leaves nothing waiting forgets the Service.
func (r *Reconciler) reportStall(_ context.Context, s *scope) (phase.Result, error) {
	if s.waitingFor == "" {
		r.stalls.forget(s.key)
		return phase.Next(), nil
	}
	now := time.Now()
	since, warned := r.stalls.see(s.key, s.svc.UID, now)
	warn, after := stallDue(since, now, warned, StallAfter)
	if warn {
		r.Recorder.Event(s.svc, corev1.EventTypeWarning, ReasonAttachStalled, msgAttachStalled(s.claimName, now.Sub(since), s.waitingFor))
		r.stalls.said(s.key)
	}
	if after > 0 {
		return phase.RetryAfter(after, "say why the attach waits if it still does then"), nil
	}
	return phase.Next(), nil
}
