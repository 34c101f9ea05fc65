package claim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
	"github.com/cozystack/metallb-iad/internal/phase"
)

// TestAwaitMetalLB: a claim is told it waits for MetalLB only once its
// placeholder has waited metallbQuiet, and then once, not on every pass.
func TestAwaitMetalLB(t *testing.T) {
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	class := &iadv1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "public"}}
	tests := []struct {
		name   string
		waited []time.Duration // one pass after each
		after  time.Duration   // the last pass's fallback look
		told   int
	}{
		{name: "just created: nothing told, a look when the quiet ends", waited: []time.Duration{0}, after: metallbQuiet},
		{name: "part of the quiet gone: a look when the rest is", waited: []time.Duration{10 * time.Second}, after: 5 * time.Second},
		{name: "quiet over: told once", waited: []time.Duration{metallbQuiet}, told: 1},
		{name: "later passes: not told again", waited: []time.Duration{20 * time.Second, 30 * time.Second, time.Minute}, told: 1},
		{name: "a restarted controller, long after: told at once", waited: []time.Duration{time.Hour}, told: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := record.NewFakeRecorder(10)
			r := &Reconciler{Deps: bootstrap.Deps{Recorder: rec}}
			s := &scope{claim: testClaim(iadv1alpha1.FamilyIPv4), class: class}
			ph := &corev1.Service{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)}}
			var res phase.Result
			for _, w := range tt.waited {
				res = r.awaitMetalLB(s, iadv1alpha1.FamilyIPv4, ph, created.Add(w))
			}
			assert.Equal(t, phase.Waiting, res.State)
			assert.Equal(t, tt.after, res.After)
			events := drain(rec)
			assert.Len(t, events, tt.told)
			for _, e := range events {
				assert.Equal(t, "Normal "+ReasonWaitingForMetalLB+" "+msgWaitingForMetalLB(iadv1alpha1.FamilyIPv4, "public"), e)
			}
		})
	}
}

// drain returns the Events a fake recorder holds.
func drain(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}
