// Package recorder is how the controllers' Events reach the API server and
// the reader: the broadcaster every manager records through (patient with a
// fresh API server's refusals, its correlator bounded) and the recorder
// that echoes every Event about a Service on the Gateway it serves.
package recorder

import (
	"strings"
	"sync"
	"sync/atomic"
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

// eventCacheSize bounds the Event correlator: client-go's 4,096 was a
// quarter of the claim controller's live heap after a thousand claims, and
// a repeat that matters follows within a few hundred others.
const eventCacheSize = 512

// patientBroadcaster retries Forbidden Events: a fresh API server refuses
// everything until RBAC is loaded, and client-go drops a refused Event for
// good, so a Warning such as `Lost` would never be said. The manager hands
// it to every recorder provider; only the first sink is kept, or each Event
// would be written once per provider. It is never shut down: a provider may
// start on its first Event while the manager stops, and would log an error.
type patientBroadcaster struct {
	record.EventBroadcaster
	once sync.Once
	sink watch.Interface
}

// NewBroadcaster is the EventBroadcaster every manager of the driver
// records through (patientBroadcaster).
func NewBroadcaster() record.EventBroadcaster {
	return &patientBroadcaster{EventBroadcaster: record.NewBroadcaster(
		record.WithCorrelatorOptions(record.CorrelatorOptions{LRUCacheSize: eventCacheSize, SpamKeyFunc: spamKey}))}
}

// spamKey is the bucket of client-go's spam filter, which lets 25 Events
// through per bucket and then one per five minutes: client-go's key (the
// source, the object and the Event type) with the reason added. Keyed by
// object alone, a run of one Warning about an object (a refusal said again
// and again) would silence every other Warning about it for minutes, such
// as the AddressLost that says the address is gone.
func spamKey(e *corev1.Event) string {
	o := e.InvolvedObject
	return strings.Join([]string{e.Source.Component, e.Source.Host, o.Kind, o.Namespace, o.Name, string(o.UID), o.APIVersion, e.Type, e.Reason}, "\x00")
}

// StartRecordingToSink records to the first sink only.
func (b *patientBroadcaster) StartRecordingToSink(sink record.EventSink) watch.Interface {
	b.once.Do(func() {
		b.sink = b.EventBroadcaster.StartRecordingToSink(newPatientSink(sink, forbiddenWait))
	})
	return b.sink
}

// patientSink retries Forbidden writes, wait apart, forbiddenTries in all,
// until the API server first accepts one: a fresh API server refuses
// everything until RBAC is loaded. From then on a refusal is what it says
// (a namespace being deleted, a policy), and each Event costs the one
// writer of all Events one try; a namespace being terminated is never
// waited for.
type patientSink struct {
	record.EventSink
	wait time.Duration
	// accepted is set once the API server has accepted a write.
	accepted *atomic.Bool
}

func newPatientSink(sink record.EventSink, wait time.Duration) patientSink {
	return patientSink{EventSink: sink, wait: wait, accepted: &atomic.Bool{}}
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
		if err == nil {
			s.accepted.Store(true)
		}
		if !s.retry(err) || try == forbiddenTries {
			return ev, err
		}
		time.Sleep(s.wait)
	}
}

// retry says whether a write refused with err is tried again.
func (s patientSink) retry(err error) bool {
	return apierrors.IsForbidden(err) && !s.accepted.Load() &&
		!apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}
