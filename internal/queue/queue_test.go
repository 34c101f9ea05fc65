package queue

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func newQueue(name string) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	return New(name, workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
}

func request(i int) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: fmt.Sprint(i)}}
}

// hung bounds every wait of these tests: past it, a worker or ShutDown is
// stuck, not slow.
const hung = wakeLimit + time.Minute

// TestShutDownWhileHandingOut shuts the queue down while workers take
// items as fast as they are added, as a controller's queue is when its
// manager stops in a burst: every worker stops, and none is handed an item
// the queue made up. Unguarded (newQueue returning priorityqueue.New's
// queue), controller-runtime v0.23's queue kept a worker in Done for ever
// within a few dozen rounds.
func TestShutDownWhileHandingOut(t *testing.T) {
	for round := range 300 {
		q := newQueue(fmt.Sprintf("round-%d", round))
		var wg sync.WaitGroup
		var bad sync.Map
		for range 4 {
			wg.Go(func() {
				for {
					r, shutdown := q.Get()
					if shutdown {
						return
					}
					if r.Namespace != "ns" {
						bad.Store(r, true)
					}
					q.Done(r)
				}
			})
		}
		stop := make(chan struct{})
		adding := make(chan struct{})
		go func() { defer close(adding); burst(q, stop) }()
		time.Sleep(time.Millisecond)
		stopped := make(chan struct{})
		go func() {
			q.ShutDown()
			close(stop)
			<-adding
			wg.Wait()
			close(stopped)
		}()
		select {
		case <-stopped:
		case <-time.After(hung):
			t.Fatalf("round %d: ShutDown or a worker is still in the queue", round)
		}
		bad.Range(func(k, _ any) bool {
			t.Errorf("round %d: a worker was handed %v", round, k)
			return true
		})
	}
}

// burst feeds q as a controller's queue is fed in a burst, kept full at
// the pace the queue takes items in (each Len flushes what was added
// since the last one), until stop. An adder that never waits for the
// queue outruns it, and what it added piles up ahead of the wake for
// seconds on a busy machine (make bench, BenchmarkShutDown): no event
// handler adds that way.
func burst(q workqueue.TypedRateLimitingInterface[reconcile.Request], stop <-chan struct{}) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		q.Add(request(i % 50))
		if i%50 == 0 {
			q.Len()
		}
	}
}

// TestShutDownIdle: a queue no worker waits in, or only idle workers, stops
// at once, and a second ShutDown is harmless.
func TestShutDownIdle(t *testing.T) {
	q := newQueue("idle")
	q.ShutDown()
	q.ShutDown()
	assert.True(t, q.ShuttingDown())
	_, shutdown := q.Get()
	assert.True(t, shutdown)

	q = newQueue("idle-workers")
	done := make(chan bool, 2)
	for range 2 {
		go func() { _, shutdown := q.Get(); done <- shutdown }()
	}
	require.Eventually(t, func() bool { return q.(*guarded).inside.Load() == 2 }, hung, time.Millisecond)
	q.ShutDown()
	for range 2 {
		select {
		case shutdown := <-done:
			assert.True(t, shutdown)
		case <-time.After(hung):
			t.Fatal("an idle worker still waits after ShutDown")
		}
	}
}

// TestDoneAfterShutDown: a worker that was in a pass when the queue shut
// down hands its item back afterwards without blocking, and learns the
// queue is shut down.
func TestDoneAfterShutDown(t *testing.T) {
	q := newQueue("in-a-pass")
	q.Add(request(1))
	q.Add(request(2))
	r, shutdown := q.Get()
	require.False(t, shutdown)
	waiting := make(chan bool, 2)
	go func() { _, shutdown := q.Get(); waiting <- shutdown }() // takes the other item, then waits
	go func() { _, shutdown := q.Get(); waiting <- shutdown }()
	require.Eventually(t, func() bool { return q.(*guarded).inside.Load() >= 1 }, hung, time.Millisecond)
	q.ShutDown()
	finished := make(chan struct{})
	go func() { q.Done(r); close(finished) }()
	select {
	case <-finished:
	case <-time.After(hung):
		t.Fatal("Done blocks after ShutDown")
	}
	_, shutdown = q.Get()
	assert.True(t, shutdown)
}

// TestStillAPriorityQueue: the guarded queue is still the priority queue
// controllers and handlers add to with a priority (the claim controller
// serves answered claims first), and hands out the higher one first.
func TestStillAPriorityQueue(t *testing.T) {
	q := newQueue("priority")
	defer q.ShutDown()
	pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
	require.True(t, ok)
	pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(-100)}, request(1))
	pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(10)}, request(2))
	require.Eventually(t, func() bool { return pq.Len() == 2 }, hung, time.Millisecond)
	r, priority, shutdown := pq.GetWithPriority()
	assert.False(t, shutdown)
	assert.Equal(t, request(2), r)
	assert.Equal(t, 10, priority)
	pq.Done(r)
}

func TestWithQueue(t *testing.T) {
	assert.NotNil(t, WithQueue(controller.Options{}).NewQueue)
	own := func(string, workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
		return nil
	}
	assert.Nil(t, WithQueue(controller.Options{NewQueue: own}).NewQueue("x", nil), "a queue the options name is kept")
}
