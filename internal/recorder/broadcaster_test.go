package recorder

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
)

// refusingSink refuses the first refusals writes with err, then accepts.
type refusingSink struct {
	record.EventSink
	err      error
	refusals int
	writes   int
}

func (s *refusingSink) Create(e *corev1.Event) (*corev1.Event, error) {
	s.writes++
	if s.writes <= s.refusals {
		return nil, s.err
	}
	return e, nil
}

func TestPatientSink(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, "e", errors.New("RBAC not loaded yet"))
	for _, tc := range []struct {
		name       string
		err        error
		refusals   int
		wantWrites int
		wantErr    bool
	}{
		{"accepted at once", forbidden, 0, 1, false},
		{"forbidden for a moment, then accepted", forbidden, 2, 3, false},
		{"forbidden for good: given up after forbiddenTries", forbidden, 100, forbiddenTries, true},
		{"another refusal is client-go's to judge: no second try", apierrors.NewBadRequest("no"), 100, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner := &refusingSink{err: tc.err, refusals: tc.refusals}
			s := newPatientSink(inner, time.Millisecond)
			_, err := s.Create(&corev1.Event{})
			assert.Equal(t, tc.wantErr, err != nil, "error: %v", err)
			assert.Equal(t, tc.wantWrites, inner.writes)
		})
	}
}

// TestPatientSinkTriesOnceWhenRBACIsLoaded: once the API server has
// accepted an Event, a refused one costs one try, and a namespace being
// deleted is never waited for: a tenant pointing Events at such a
// namespace cannot hold up the one writer of all Events.
func TestPatientSinkTriesOnceWhenRBACIsLoaded(t *testing.T) {
	terminating := apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, "e", errors.New("namespace kube-x is being terminated"))
	terminating.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}

	inner := &refusingSink{err: terminating, refusals: 100}
	_, err := newPatientSink(inner, time.Millisecond).Create(&corev1.Event{})
	assert.Error(t, err)
	assert.Equal(t, 1, inner.writes, "a namespace being deleted: one try, even before any write was accepted")

	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, "e", errors.New("no"))
	inner = &refusingSink{err: forbidden}
	s := newPatientSink(inner, time.Millisecond)
	_, err = s.Create(&corev1.Event{})
	require.NoError(t, err)
	inner.refusals, inner.writes = 100, 0
	_, err = s.Create(&corev1.Event{})
	assert.Error(t, err)
	assert.Equal(t, 1, inner.writes, "refused after one was accepted: one try")
}

// countingSink counts the Events created through it.
type countingSink struct {
	record.EventSink
	created atomic.Int32
	patched atomic.Int32
}

func (s *countingSink) Create(e *corev1.Event) (*corev1.Event, error) {
	s.created.Add(1)
	return e, nil
}

func (s *countingSink) Patch(e *corev1.Event, _ []byte) (*corev1.Event, error) {
	s.patched.Add(1)
	return e, nil
}

// TestPatientBroadcasterRemembersRecentEvents: a repeat of a recent Event is
// folded into the existing one (a PATCH of its count); a repeat after
// eventCacheSize other Events is written anew, so the correlator's memory
// stays bounded however many objects the controller records Events on.
func TestPatientBroadcasterRemembersRecentEvents(t *testing.T) {
	for _, tc := range []struct {
		name        string
		others      int
		wantPatched int32
		wantCreated int32
	}{
		{"a repeat after a few other Events is folded", 10, 1, 11},
		{"a repeat after more than eventCacheSize others is written anew", eventCacheSize + 10, 0, eventCacheSize + 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBroadcaster()
			defer b.Shutdown()
			sink := &countingSink{}
			b.StartRecordingToSink(sink)
			rec := b.NewRecorder(clientgoscheme.Scheme, corev1.EventSource{Component: "test"})
			pod := func(i int) *corev1.Pod {
				return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint("p", i), UID: types.UID(fmt.Sprint("u", i))}}
			}
			rec.Event(pod(0), corev1.EventTypeNormal, "Bound", "bound")
			for i := range tc.others {
				rec.Event(pod(i+1), corev1.EventTypeNormal, "Bound", "bound")
			}
			require.Eventually(t, func() bool { return sink.created.Load() == int32(tc.others)+1 }, 10*time.Second, 10*time.Millisecond)
			rec.Event(pod(0), corev1.EventTypeNormal, "Bound", "bound")
			assert.Eventually(t, func() bool { return sink.created.Load()+sink.patched.Load() == int32(tc.others)+2 }, 10*time.Second, 10*time.Millisecond)
			assert.Equal(t, tc.wantPatched, sink.patched.Load())
			assert.Equal(t, tc.wantCreated, sink.created.Load())
		})
	}
}

// TestPatientBroadcasterRecordsOnce: the manager's recorder providers each
// start recording to a sink of their own; an Event is still written once.
func TestPatientBroadcasterRecordsOnce(t *testing.T) {
	b := NewBroadcaster()
	defer b.Shutdown()
	first, second := &countingSink{}, &countingSink{}
	b.StartRecordingToSink(first)
	b.StartRecordingToSink(second)

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u"}}
	b.NewRecorder(clientgoscheme.Scheme, corev1.EventSource{Component: "test"}).Event(pod, corev1.EventTypeWarning, "Lost", "gone")
	assert.Eventually(t, func() bool { return first.created.Load() == 1 }, 5*time.Second, 10*time.Millisecond, "the first sink writes the Event")
	assert.Never(t, func() bool { return first.created.Load()+second.created.Load() > 1 }, 300*time.Millisecond, 10*time.Millisecond,
		"and only it: one write per Event")
}

// TestSpamFilterKeysByReason: once one Warning about an object has used up
// client-go's burst, another Warning about the same object still gets
// through, and the same Warning is still held back.
func TestSpamFilterKeysByReason(t *testing.T) {
	b := NewBroadcaster()
	defer b.Shutdown()
	sink := &countingSink{}
	b.StartRecordingToSink(sink)
	rec := b.NewRecorder(clientgoscheme.Scheme, corev1.EventSource{Component: "test"})
	addr := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: "u"}}
	// Distinct messages: each is its own Event, none folded into another.
	for i := range 40 {
		rec.Eventf(addr, corev1.EventTypeWarning, "AttachmentRefused", "refused %d", i)
	}
	require.Eventually(t, func() bool { return sink.created.Load()+sink.patched.Load() >= 25 }, 10*time.Second, 10*time.Millisecond)
	rec.Event(addr, corev1.EventTypeWarning, "AddressLost", "gone")
	assert.Eventually(t, func() bool { return sink.created.Load()+sink.patched.Load() == 26 }, 10*time.Second, 10*time.Millisecond,
		"the burst of 25 refusals, then the AddressLost; the 15 refusals past the burst are held back")
	assert.Never(t, func() bool { return sink.created.Load()+sink.patched.Load() > 26 }, 300*time.Millisecond, 10*time.Millisecond)
}
