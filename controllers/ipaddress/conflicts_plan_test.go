package ipaddress

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
)

func TestUnauthorizedHolders(t *testing.T) {
	const ip = "192.0.2.7"
	a := associated(bound(address("a", ip), "t", "c"), "t", "web")
	placeholder := svc(phNS, "hold-a", "", ip)
	placeholder.Labels = map[string]string{marks.LabelPlaceholder: names.PlaceholderHold}
	forged := svc("intruder", "forged", "", ip)
	forged.Labels = map[string]string{marks.LabelPlaceholder: names.PlaceholderHold}
	holders := []corev1.Service{
		placeholder,
		svc("t", "web", "", ip),
		svc("t", "api", "", ip, iadv1alpha1.ServiceClaimAnnotation, "c", marks.KeyPinnedBy, "c"),
		svc("intruder", "web", ip, ip),
		svc("t", "plain", "", ip),
		// Not the driver's: the same rule as the Service controller's
		// conflict detection (marks.Exempt), or the address would flip
		// between Conflict and recovery.
		svc(phNS, "unlabelled-in-the-placeholder-namespace", "", ip),
		forged,
	}
	assert.Equal(t, []string{"intruder/web", "t/plain", phNS + "/unlabelled-in-the-placeholder-namespace", "intruder/forged"},
		svcNames(unauthorizedHolders(a, holders, phNS)))
	assert.Empty(t, unauthorizedHolders(a, holders[:3], phNS))
}

func TestConflictSettling(t *testing.T) {
	now := time.Now()
	a := address("a", "192.0.2.7")
	assert.Zero(t, conflictSettling(a, now), "no Conflict condition")
	a.Status.Conditions = []metav1.Condition{{Type: conditions.Conflict, Status: metav1.ConditionTrue,
		Reason: conditions.ReasonUnauthorizedHolder, LastTransitionTime: metav1.NewTime(now.Add(-500 * time.Millisecond))}}
	assert.InDelta(t, 1500*time.Millisecond, conflictSettling(a, now), float64(time.Millisecond))
	a.Status.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(-time.Minute))
	assert.Zero(t, conflictSettling(a, now), "settled long ago")
	a.Status.Conditions[0].Status = metav1.ConditionFalse
	a.Status.Conditions[0].LastTransitionTime = metav1.NewTime(now)
	assert.Zero(t, conflictSettling(a, now), "condition False")
}
