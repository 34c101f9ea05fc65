package ipaddress

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
)

// written is the annotations m writes on a copy of svc; nil when it
// writes nothing.
func written(svc *corev1.Service, m marks.Marks) map[string]string {
	if !m.Changed() {
		return nil
	}
	c := svc.DeepCopy()
	m.Apply(c)
	return c.Annotations
}

func TestReleaseStep(t *testing.T) {
	const ip = "192.0.2.7"
	a := address("ip-192-0-2-7", ip)
	a.Spec.ClaimRef = &iadv1alpha1.ClaimReference{Namespace: "t", Name: "c"}
	svc := func(ann map[string]string, ingress ...string) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "web", Annotations: ann},
			Spec: corev1.ServiceSpec{IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}}}
		for _, in := range ingress {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: in})
		}
		return s
	}
	pinned := map[string]string{marks.KeyPin: ip, marks.KeyPinnedBy: "c",
		marks.KeySharing: "k", marks.KeySharedBy: "c", "keep": "me"}
	releasing := map[string]string{marks.KeyPin: "::", marks.KeyPinnedBy: "c", "keep": "me"}
	deleting := svc(pinned, ip)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	tests := []struct {
		name string
		svc  *corev1.Service
		want releaseAction
		ann  map[string]string
	}{
		{"holds the IP: the release pin, the key goes, the marker stays", svc(pinned, ip), releasePin, releasing},
		{"release pin written, MetalLB has not let go yet", svc(releasing, ip), releaseWait, nil},
		{"release pin, ingress empty: pin and marker go", svc(releasing), releaseWithdraw, map[string]string{"keep": "me"}},
		{"release pin, another address still shown", svc(releasing, "192.0.2.8"), releaseWait, nil},
		{"pinned, not holding yet: the IP leaves the pin", svc(pinned), releaseDropIP, map[string]string{"keep": "me"}},
		{"hand-written pin: never touched", svc(map[string]string{marks.KeyPin: ip}, ip), releaseNone, nil},
		{"marker of another claim, not pinned to the IP", svc(map[string]string{marks.KeyPin: "::", marks.KeyPinnedBy: "x"}), releaseNone, nil},
		{"being deleted: its deletion frees the IP", deleting, releaseNone, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, m := releaseStep(tt.svc, a, ip)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.ann, written(tt.svc, m))
		})
	}

	// A Service let go in one write (marks.LetGo) is waited for while it
	// holds the IP, and left alone once MetalLB has taken it back.
	associated := associated(a.DeepCopy(), "t", "web")
	for _, tt := range []struct {
		name string
		svc  *corev1.Service
		want releaseAction
	}{
		{"let go, still holding: wait", svc(map[string]string{"keep": "me"}, ip), releaseWait},
		{"let go, MetalLB took it back: nothing to do", svc(map[string]string{"keep": "me"}), releaseNone},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, m := releaseStep(tt.svc, associated, ip)
			assert.Equal(t, tt.want, got)
			assert.False(t, m.Changed(), "nothing to write")
		})
	}
}
