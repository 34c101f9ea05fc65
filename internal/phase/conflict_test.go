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
		err     error
		wantRes ctrl.Result
		wantErr error
	}{
		{"no error keeps the result", nil, res, nil},
		{"a conflict requeues quietly", conflict(), ctrl.Result{RequeueAfter: ConflictRetry}, nil},
		{"a wrapped conflict too", fmt.Errorf("pin: %w", conflict()), ctrl.Result{RequeueAfter: ConflictRetry}, nil},
		{"another error is returned as it is", other, res, other},
		{"both, joined and wrapped", fmt.Errorf("phase: %w", errors.Join(conflict(), other)), res, other},
		{"joined conflicts, wrapped", fmt.Errorf("phase: %w", errors.Join(conflict(), conflict())), ctrl.Result{RequeueAfter: ConflictRetry}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := onConflict(ctx, res, tc.err)
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
