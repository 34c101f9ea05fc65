package bootstrap

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
			s := patientSink{EventSink: inner, wait: time.Millisecond}
			_, err := s.Create(&corev1.Event{})
			assert.Equal(t, tc.wantErr, err != nil, "error: %v", err)
			assert.Equal(t, tc.wantWrites, inner.writes)
		})
	}
}
