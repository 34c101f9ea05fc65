package classparams

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
)

func TestGrantDecision(t *testing.T) {
	addr := func(name string, granted *bool, deleting bool) iadv1alpha1.IPAddress {
		a := iadv1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if deleting {
			a.DeletionTimestamp = &metav1.Time{}
		}
		if granted != nil {
			st := metav1.ConditionFalse
			if *granted {
				st = metav1.ConditionTrue
			}
			a.Status.Conditions = []metav1.Condition{{Type: conditions.Granted, Status: st}}
		}
		return a
	}
	yes, no := true, false
	plain := &metallbv1beta1.IPAddressPool{}
	granted := &metallbv1beta1.IPAddressPool{}
	marks.WithGrant(granted, "public")
	otherClass := &metallbv1beta1.IPAddressPool{}
	marks.WithGrant(otherClass, "private")

	tests := []struct {
		name     string
		existing *metallbv1beta1.IPAddressPool
		addrs    []iadv1alpha1.IPAddress
		want     bool
		waiting  []string
	}{
		{"a new pool has no holders to lose", nil, []iadv1alpha1.IPAddress{addr("a", nil, false)}, true, nil},
		{"a pool that requires the grant keeps requiring it", granted, []iadv1alpha1.IPAddress{addr("a", &no, false)}, true, nil},
		{"an older pool without addresses", plain, nil, true, nil},
		{"an older pool whose addresses are all granted", plain, []iadv1alpha1.IPAddress{addr("a", &yes, false), addr("b", &yes, false)}, true, nil},
		{"an older pool waits for ungranted and unevaluated addresses", plain,
			[]iadv1alpha1.IPAddress{addr("c", nil, false), addr("a", &yes, false), addr("b", &no, false)}, false, []string{"b", "c"}},
		{"an address being torn down is not waited for", plain, []iadv1alpha1.IPAddress{addr("a", &no, true)}, true, nil},
		{"another class's selector is not ours", otherClass, []iadv1alpha1.IPAddress{addr("a", &no, false)}, false, []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, waiting, after := GrantDecision(tt.existing, "public", tt.addrs, time.Now())
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.waiting, waiting)
			assert.Zero(t, after)
		})
	}
}

// TestGrantDecisionSettles: addresses granted a moment ago make the pool
// wait until MetalLB's cache has surely seen their holders' labels.
func TestGrantDecisionSettles(t *testing.T) {
	now := time.Now()
	granted := func(name string, ago time.Duration) iadv1alpha1.IPAddress {
		a := iadv1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: name}}
		a.Status.Conditions = []metav1.Condition{{Type: conditions.Granted, Status: metav1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(now.Add(-ago))}}
		return a
	}
	plain := &metallbv1beta1.IPAddressPool{}
	got, waiting, after := GrantDecision(plain, "public", []iadv1alpha1.IPAddress{granted("a", time.Minute), granted("b", time.Second)}, now)
	assert.False(t, got, "b was granted a second ago")
	assert.Empty(t, waiting)
	assert.Equal(t, GrantSettle-time.Second, after)

	got, waiting, after = GrantDecision(plain, "public", []iadv1alpha1.IPAddress{granted("a", time.Minute), granted("b", GrantSettle)}, now)
	assert.True(t, got)
	assert.Empty(t, waiting)
	assert.Zero(t, after)
}
