package ipaddress

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
)

func TestFirstReportDeferral(t *testing.T) {
	now := time.Now()
	held := []metav1.Condition{{Type: conditions.Held, Status: metav1.ConditionTrue, Reason: conditions.ReasonHeldByPlaceholder}}
	for _, tc := range []struct {
		name      string
		age       time.Duration
		orig      func(*iadv1alpha1.IPAddress)
		nextPhase iadv1alpha1.IPAddressPhase
		want      time.Duration
	}{
		{name: "new, no phase yet: wait for the core", age: 2 * time.Second, want: 8 * time.Second},
		{name: "the core set the phase", age: time.Second, orig: func(a *iadv1alpha1.IPAddress) { a.Status.Phase = iadv1alpha1.AddressBound }},
		{name: "not the first report", age: time.Second, orig: func(a *iadv1alpha1.IPAddress) { a.Status.Conditions = held }},
		{name: "associated", age: time.Second, orig: func(a *iadv1alpha1.IPAddress) {
			a.Status.AssociatedTo = &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "ns", Name: "web"}
		}},
		{name: "the driver sets a phase of its own", age: time.Second, nextPhase: iadv1alpha1.AddressLost},
		{name: "being deleted", age: time.Second, orig: func(a *iadv1alpha1.IPAddress) { a.DeletionTimestamp = &metav1.Time{Time: now} }},
		{name: "the core is slow or down: the window has passed", age: firstReportWindow + time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig := address("a", "192.0.2.7")
			orig.CreationTimestamp = metav1.NewTime(now.Add(-tc.age))
			if tc.orig != nil {
				tc.orig(orig)
			}
			next := orig.DeepCopy()
			next.Status.Conditions = held
			next.Status.Phase = tc.nextPhase
			assert.InDelta(t, tc.want, firstReportDeferral(orig, next, now), float64(time.Millisecond))
		})
	}
}
