// Package queue gives the driver's controllers their work queue:
// controller-runtime's priority queue, stopped so that a stop cannot hang.
//
// The priority queue of controller-runtime v0.23 can deadlock when it is
// shut down while it hands an item to a worker: the worker returns on the
// shutdown, the queue's hand-out goroutine stays blocked on its send with
// the queue's locks held, and the next worker to finish a pass blocks in
// Done. The controller then never stops, and the manager gives up after
// its 30 s grace period: a binary that takes 30 s to stop, and hands its
// lease over that much later. controller-runtime v0.25.0 fixes the queue;
// the guard can go with the move to it.
//
// New wraps the queue so that no worker waits inside it when it is shut
// down: ShutDown first turns workers away at the door, then wakes every
// worker still waiting at once, each with an item of its own that no pass
// ever sees and that goes ahead of every other item, and shuts the queue
// down only when none waits.
package queue

import (
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

const (
	// wakeLimit bounds how long ShutDown wakes waiting workers before it
	// shuts the queue down regardless.
	wakeLimit = 10 * time.Second
	// wakeAgain is how long ShutDown waits for the workers it woke before
	// it wakes the ones still waiting again.
	wakeAgain = 100 * time.Millisecond
)

// WithQueue returns opts with New as its queue, unless it names one.
func WithQueue(opts controller.Options) controller.Options {
	if opts.NewQueue == nil {
		opts.NewQueue = New
	}
	return opts
}

// New returns controller-runtime's priority queue for the controller name,
// with rateLimiter, guarded as the package says.
func New(name string, rateLimiter workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	return &guarded{name: name, left: make(chan struct{}, 1), PriorityQueue: priorityqueue.New(name, func(o *priorityqueue.Opts[reconcile.Request]) {
		o.RateLimiter = rateLimiter
		o.Log = ctrl.Log.WithName("queue").WithValues("controller", name)
	})}
}

type guarded struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	name string
	// stopping turns workers away before they wait in the queue.
	stopping atomic.Bool
	// inside counts the workers in GetWithPriority.
	inside atomic.Int64
	// left hears when the last worker leaves GetWithPriority once ShutDown
	// has begun.
	left chan struct{}
	// woken counts the items ShutDown has woken workers with.
	woken int
}

func (q *guarded) Get() (reconcile.Request, bool) {
	r, _, shutdown := q.GetWithPriority()
	return r, shutdown
}

// GetWithPriority hands out the next item, or says the queue is shut down
// once ShutDown has begun; an item taken after that is given back undone.
func (q *guarded) GetWithPriority() (reconcile.Request, int, bool) {
	q.inside.Add(1)
	defer q.leave()
	if q.stopping.Load() {
		return reconcile.Request{}, 0, true
	}
	r, priority, shutdown := q.PriorityQueue.GetWithPriority()
	if shutdown || q.stopping.Load() {
		if !shutdown {
			q.PriorityQueue.Done(r)
		}
		return reconcile.Request{}, 0, true
	}
	return r, priority, false
}

func (q *guarded) leave() {
	if q.inside.Add(-1) == 0 && q.stopping.Load() {
		select {
		case q.left <- struct{}{}:
		default:
		}
	}
}

// ShutDown wakes every worker waiting in the queue, then shuts it down.
//
// A worker counted in inside once stopping is set either waits in the
// queue or is on its way out; one wake item each is enough, and the items
// left over are dropped with the queue. The wake is tried again while any
// waits, so that no count taken on the way misses one.
func (q *guarded) ShutDown() {
	if q.stopping.Swap(true) {
		return
	}
	deadline := time.After(wakeLimit)
wake:
	for n := q.inside.Load(); n > 0; n = q.inside.Load() {
		q.wake(int(n))
		select {
		case <-q.left:
		case <-time.After(wakeAgain):
		case <-deadline:
			ctrl.Log.WithName("queue").Info("workers still wait in the queue after waking them; shutting it down regardless (the controller may not stop)",
				"controller", q.name, "waiting", q.inside.Load())
			break wake
		}
	}
	q.PriorityQueue.ShutDown()
}

// wake adds n wake items at once, ahead of every item a controller adds.
func (q *guarded) wake(n int) {
	items := make([]reconcile.Request, n)
	for i := range items {
		items[i] = wakeItem(q.woken)
		q.woken++
	}
	q.PriorityQueue.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(math.MaxInt)}, items...)
}

// ShutDownWithDrain is the guarded ShutDown. controller-runtime's priority
// queue drains nothing here either (its ShutDownWithDrain is its ShutDown);
// the override only keeps the embedded one from shutting the queue down
// past the guard.
func (q *guarded) ShutDownWithDrain() { q.ShutDown() }

// ShuttingDown is true from the start of ShutDown.
func (q *guarded) ShuttingDown() bool { return q.stopping.Load() }

// wakeItem is the i-th item ShutDown wakes a worker with: no object has
// its namespace, and a worker gives it back without a pass.
func wakeItem(i int) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "\x00wake", Name: strconv.Itoa(i)}}
}
