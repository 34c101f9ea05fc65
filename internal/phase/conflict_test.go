package phase

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
)

func conflict() error {
	return apierrors.NewConflict(schema.GroupResource{Resource: "services"}, "s", errors.New("changed"))
}

func TestOnConflict(t *testing.T) {
	ctx := context.Background()
	res := ctrl.Result{RequeueAfter: time.Minute}
	other := errors.New("boom")
	for _, tc := range []struct {
		name    string
		errs    []error
		wantRes ctrl.Result
		wantErr error
	}{
		{"no error keeps the result", nil, res, nil},
		{"nil errors keep the result", []error{nil, nil}, res, nil},
		{"a conflict requeues quietly", []error{conflict()}, ctrl.Result{RequeueAfter: ConflictRetry}, nil},
		{"a wrapped conflict too", []error{fmt.Errorf("pin: %w", conflict()), nil}, ctrl.Result{RequeueAfter: ConflictRetry}, nil},
		{"only conflicts", []error{conflict(), conflict()}, ctrl.Result{RequeueAfter: ConflictRetry}, nil},
		{"another error is returned as it is", []error{other}, res, other},
		{"a conflict and another error", []error{conflict(), other}, res, other},
		{"both, joined and wrapped", []error{fmt.Errorf("phase: %w", errors.Join(conflict(), other))}, res, other},
		{"joined conflicts, wrapped", []error{fmt.Errorf("phase: %w", errors.Join(conflict(), conflict()))}, ctrl.Result{RequeueAfter: ConflictRetry}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := onConflict(ctx, res, tc.errs...)
			assert.Equal(t, tc.wantRes, got)
			if tc.wantErr == nil {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, tc.wantErr)
		})
	}
	_, err := onConflict(ctx, res, other)
	assert.Same(t, other, err, "a single error is not wrapped")
}
