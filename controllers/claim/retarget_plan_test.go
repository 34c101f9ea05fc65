package claim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
)

func TestRetargeted(t *testing.T) {
	ph := func(mut func(s *corev1.Service)) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{
			Labels:      map[string]string{marks.LabelPlaceholder: names.PlaceholderAllocation},
			Annotations: map[string]string{marks.KeyClass: "old"},
		}}
		mut(s)
		return s
	}
	same := func(*corev1.Service) {}
	tests := []struct {
		name  string
		ph    *corev1.Service
		class string
		want  bool
	}{
		{"no placeholder", nil, "new", false},
		{"drawing for the class the claim names", ph(same), "old", false},
		{"drawing for another class", ph(same), "new", true},
		{"the claim is no longer ours", ph(same), "", true},
		{"handed over to an address already", ph(func(s *corev1.Service) { s.Labels[marks.LabelAddress] = "ip-192-0-2-1" }), "new", false},
		{"a hold placeholder", ph(func(s *corev1.Service) { s.Labels[marks.LabelPlaceholder] = names.PlaceholderHold }), "new", false},
		{"being deleted", ph(func(s *corev1.Service) { s.DeletionTimestamp = &metav1.Time{} }), "new", false},
		{"no class recorded (the annotation taken off): observe records it", ph(func(s *corev1.Service) { delete(s.Annotations, marks.KeyClass) }), "new", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, retargeted(tt.ph, tt.class))
		})
	}
}
