package stale

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestEventTimes(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(t0.Add(d)) }
	micro := func(d time.Duration) metav1.MicroTime { return metav1.NewMicroTime(t0.Add(d)) }
	for _, tc := range []struct {
		name        string
		ev          corev1.Event
		first, last time.Time
	}{
		{"core/v1 timestamps", corev1.Event{FirstTimestamp: at(time.Second), LastTimestamp: at(time.Minute)},
			t0.Add(time.Second), t0.Add(time.Minute)},
		{"events/v1 with a series", corev1.Event{EventTime: micro(time.Second),
			Series: &corev1.EventSeries{LastObservedTime: micro(time.Hour)}},
			t0.Add(time.Second), t0.Add(time.Hour)},
		{"events/v1, once", corev1.Event{EventTime: micro(2 * time.Second)}, t0.Add(2 * time.Second), t0.Add(2 * time.Second)},
		{"no time but the object's", corev1.Event{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: at(3 * time.Second)}},
			t0.Add(3 * time.Second), t0.Add(3 * time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.True(t, tc.first.Equal(EventFirstTime(&tc.ev)), "first: %s", EventFirstTime(&tc.ev))
			assert.True(t, tc.last.Equal(EventTime(&tc.ev)), "last: %s", EventTime(&tc.ev))
		})
	}
}
