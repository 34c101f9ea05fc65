package bench

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cozystack/metallb-iad/internal/queue"
)

// The work queue's shut-down (internal/queue): how long ShutDown takes to
// wake every worker waiting in the queue, with no control plane.

func queueItem(i int) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: fmt.Sprint(i)}}
}

// adders are the ways a queue is fed while it is shut down.
var adders = []struct {
	name string
	add  func(q workqueue.TypedRateLimitingInterface[reconcile.Request], stop <-chan struct{})
}{
	// burst: a controller's queue in a burst, kept full at the pace the
	// queue takes items in (each Len flushes what was added since the
	// last one), as event handlers feed it from a watch.
	{"burst", func(q workqueue.TypedRateLimitingInterface[reconcile.Request], stop <-chan struct{}) {
		feed(q, stop, true)
	}},
	// flood: an adder that never waits for the queue, faster than the
	// queue can take items in, so what it added piles up ahead of
	// everything added after it. No event handler adds this way.
	{"flood", func(q workqueue.TypedRateLimitingInterface[reconcile.Request], stop <-chan struct{}) {
		feed(q, stop, false)
	}},
}

// feed adds 50 items over and over until stop, waiting for the queue to
// take them in every 50 when paced.
func feed(q workqueue.TypedRateLimitingInterface[reconcile.Request], stop <-chan struct{}, paced bool) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		q.Add(queueItem(i % 50))
		if paced && i%50 == 0 {
			q.Len()
		}
	}
}

// BenchmarkShutDown (make bench) measures how long ShutDown takes while four workers
// take items as fast as they come, under each adder: the median and the
// longest of its rounds.
func BenchmarkShutDown(b *testing.B) {
	const rounds = 40
	for _, a := range adders {
		b.Run(a.name, func(b *testing.B) {
			for range b.N {
				took := make([]time.Duration, 0, rounds)
				for round := range rounds {
					took = append(took, shutDownOnce(fmt.Sprintf("bench-%s-%d", a.name, round), a.add))
				}
				slices.Sort(took)
				b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(took[len(took)-1].Microseconds())/1000, "max-ms")
			}
		})
	}
}

func shutDownOnce(name string, add func(workqueue.TypedRateLimitingInterface[reconcile.Request], <-chan struct{})) time.Duration {
	q := queue.New(name, workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				r, shutdown := q.Get()
				if shutdown {
					return
				}
				q.Done(r)
			}
		})
	}
	stop := make(chan struct{})
	adding := make(chan struct{})
	go func() { defer close(adding); add(q, stop) }()
	time.Sleep(time.Millisecond)
	begun := time.Now()
	q.ShutDown()
	took := time.Since(begun)
	close(stop)
	<-adding
	wg.Wait()
	return took
}
