package class

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
)

// TestRefuseOncePerChange: a refusal is an Event once per change of it,
// and again once the class was rendered in between.
func TestRefuseOncePerChange(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	r := &Reconciler{Deps: bootstrap.Deps{Recorder: rec}}
	class := &iadv1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "refuse-unit", UID: "u1"}}
	t.Cleanup(func() { r.forgetClass(class.Name) })
	ctx := context.Background()
	overlap := &refusal{reason: ReasonOverlappingRanges, message: "overlap"}

	r.refuse(ctx, class, overlap)
	r.refuse(ctx, class, overlap)
	r.refuse(ctx, class, &refusal{reason: ReasonInvalidParameters, message: "bad"})
	r.reported.Forget(class.Name) // rendered
	r.refuse(ctx, class, overlap)
	close(rec.Events)
	var got []string
	for e := range rec.Events {
		got = append(got, e)
	}
	assert.Equal(t, []string{"Warning OverlappingRanges overlap", "Warning InvalidParameters bad", "Warning OverlappingRanges overlap"}, got)
}
