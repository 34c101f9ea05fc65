package bootstrap

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/record"
)

// An Event the API server refuses as Forbidden is tried forbiddenTries
// times in all, forbiddenWait apart.
const (
	forbiddenTries = 4
	forbiddenWait  = time.Second
)

// eventCacheSize is how many recent Events the broadcaster's correlator
// remembers, to fold a repeat into a count on the existing Event instead of
// writing a new one. client-go remembers 4,096 by default, in three caches
// of a few hundred bytes to a few KiB an entry, messages included: after a
// burst of a thousand claims that was about a quarter of the claim
// controller's live heap (its heap profile in the claim benchmark). The
// driver's Events come once per decision, and a repeat that matters (a
// Warning renewed on the next pass) follows within a few hundred others.
const eventCacheSize = 512

// patientBroadcaster is the manager's Event broadcaster. Its sink tries an
// Event the API server refuses as Forbidden a few more times before it
// gives up: right after an API server starts, its authorizer refuses every
// request until it has loaded the RBAC objects, and client-go drops an
// Event refused with any API status for good. A Warning such as an
// address's `Lost` would be gone with it, and nothing says it again.
//
// The manager hands one broadcaster to each of its recorder providers, and
// each starts recording to a sink of its own: only the first is kept, or
// every Event would be written once per provider. The manager does not shut
// down a broadcaster it was given, and nothing here does either: a
// provider starts recording on its first Event, which can come while the
// manager stops, and a broadcaster shut down by then logs an error. The
// process's end stops it.
type patientBroadcaster struct {
	record.EventBroadcaster
	once sync.Once
	sink watch.Interface
}

func newPatientBroadcaster() *patientBroadcaster {
	return &patientBroadcaster{EventBroadcaster: record.NewBroadcaster(
		record.WithCorrelatorOptions(record.CorrelatorOptions{LRUCacheSize: eventCacheSize}))}
}

// StartRecordingToSink records to the first sink it is given, patiently,
// and ignores the others.
func (b *patientBroadcaster) StartRecordingToSink(sink record.EventSink) watch.Interface {
	b.once.Do(func() {
		b.sink = b.EventBroadcaster.StartRecordingToSink(patientSink{EventSink: sink, wait: forbiddenWait})
	})
	return b.sink
}

// patientSink tries again, wait apart, what the API server refuses as
// Forbidden, forbiddenTries times in all.
type patientSink struct {
	record.EventSink
	wait time.Duration
}

func (s patientSink) Create(e *corev1.Event) (*corev1.Event, error) {
	return s.patiently(func() (*corev1.Event, error) { return s.EventSink.Create(e) })
}

func (s patientSink) Update(e *corev1.Event) (*corev1.Event, error) {
	return s.patiently(func() (*corev1.Event, error) { return s.EventSink.Update(e) })
}

func (s patientSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	return s.patiently(func() (*corev1.Event, error) { return s.EventSink.Patch(e, data) })
}

func (s patientSink) patiently(write func() (*corev1.Event, error)) (*corev1.Event, error) {
	for try := 1; ; try++ {
		ev, err := write()
		if !apierrors.IsForbidden(err) || try == forbiddenTries {
			return ev, err
		}
		time.Sleep(s.wait)
	}
}
