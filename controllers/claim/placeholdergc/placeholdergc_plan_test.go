package placeholdergc

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
)

func TestIsOrphan(t *testing.T) {
	const alloc, hold = names.PlaceholderAllocation, names.PlaceholderHold
	live := testClaim(iadv1alpha1.FamilyIPv4)
	replaced := testClaim(iadv1alpha1.FamilyIPv4)
	replaced.UID = "a-newer-claim"
	backing := testAddress("ip-192-0-2-1", "192.0.2.1", &iadv1alpha1.ClaimReference{Namespace: "tenant", Name: "web", UID: string(testUID)})
	backingNoUID := testAddress("ip-192-0-2-1", "192.0.2.1", &iadv1alpha1.ClaimReference{Namespace: "tenant", Name: "web"})
	someoneElses := testAddress("ip-192-0-2-1", "192.0.2.1", &iadv1alpha1.ClaimReference{Namespace: "tenant", Name: "db", UID: "x"})
	unbound := testAddress("ip-192-0-2-1", "192.0.2.1", nil)
	otherName := testAddress("ip-192-0-2-2", "192.0.2.2", &iadv1alpha1.ClaimReference{Namespace: "tenant", Name: "web", UID: string(testUID)})

	tests := []struct {
		name  string
		ph    *corev1.Service
		claim *iadv1alpha1.IPAddressClaim
		addr  *iadv1alpha1.IPAddress
		want  bool
	}{
		{"claim live", testPlaceholder(alloc, "", ""), live, nil, false},
		{"claim live, recorded half-way", testPlaceholder(alloc, "ip-192-0-2-1", "192.0.2.1"), live, nil, false},
		{"claim gone, nothing recorded", testPlaceholder(alloc, "", ""), nil, nil, true},
		{"claim gone, labelled but no IPAddress", testPlaceholder(alloc, "ip-192-0-2-1", "192.0.2.1"), nil, nil, true},
		{"claim replaced by another of the same name", testPlaceholder(alloc, "", "192.0.2.1"), replaced, nil, true},
		{"claim gone, backs its IPAddress", testPlaceholder(alloc, "ip-192-0-2-1", "192.0.2.1"), nil, &backing, false},
		{"claim gone, backs its IPAddress (uid not filled in)", testPlaceholder(alloc, "ip-192-0-2-1", "192.0.2.1"), nil, &backingNoUID, false},
		{"claim gone, owner-referenced to an IPAddress", testPlaceholder(alloc, "ip-192-0-2-1", "192.0.2.1", "ip-192-0-2-1"), nil, nil, false},
		{"claim gone, the IPAddress is someone else's", testPlaceholder(alloc, "ip-192-0-2-1", "192.0.2.1"), nil, &someoneElses, true},
		{"claim gone, the IPAddress is unbound", testPlaceholder(alloc, "ip-192-0-2-1", "192.0.2.1"), nil, &unbound, true},
		{"claim gone, an IPAddress of another name", testPlaceholder(alloc, "ip-192-0-2-1", "192.0.2.1"), nil, &otherName, true},
		{"hold placeholders are the IPAddress controller's", testPlaceholder(hold, "ip-192-0-2-1", "192.0.2.1"), nil, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, isOrphan(tt.ph, tt.claim, tt.addr))
		})
	}
}

// TestGCEvents: the GC hears of a claim only when it goes, and of an
// address when it goes or its claim reference changes; status changes,
// which cannot make a placeholder an orphan, cost it no pass.
func TestGCEvents(t *testing.T) {
	claim := &iadv1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "ip", UID: "u1"}}
	bound := func() *iadv1alpha1.IPAddress {
		return &iadv1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "ip-192-0-2-1"},
			Spec: iadv1alpha1.IPAddressSpec{ClaimRef: &iadv1alpha1.ClaimReference{Namespace: "t", Name: "ip", UID: "u1"}}}
	}
	assert.False(t, claimGone.Create(event.CreateEvent{Object: claim}), "a claim created")
	assert.False(t, claimGone.Update(event.UpdateEvent{ObjectOld: claim, ObjectNew: claim}), "a claim changed")
	replaced := claim.DeepCopy()
	replaced.UID = "u2"
	assert.True(t, claimGone.Update(event.UpdateEvent{ObjectOld: claim, ObjectNew: replaced}),
		"a claim replaced while the watch was down: the relist's update from the old uid")
	assert.True(t, claimGone.Delete(event.DeleteEvent{Object: claim}), "a claim gone")

	for name, tc := range map[string]struct {
		mut  func(*iadv1alpha1.IPAddress)
		want bool
	}{
		"status":       {func(a *iadv1alpha1.IPAddress) { a.Status.Phase = iadv1alpha1.AddressBound }, false},
		"unbound":      {func(a *iadv1alpha1.IPAddress) { a.Spec.ClaimRef = nil }, true},
		"rebound":      {func(a *iadv1alpha1.IPAddress) { a.Spec.ClaimRef.UID = "u2" }, true},
		"unchanged":    {func(*iadv1alpha1.IPAddress) {}, false},
		"other labels": {func(a *iadv1alpha1.IPAddress) { a.Labels = map[string]string{"x": "y"} }, false},
	} {
		n := bound()
		tc.mut(n)
		assert.Equal(t, tc.want, addressUnbound.Update(event.UpdateEvent{ObjectOld: bound(), ObjectNew: n}), name)
	}
	assert.True(t, addressUnbound.Delete(event.DeleteEvent{Object: bound()}), "an address gone")
	assert.False(t, addressUnbound.Create(event.CreateEvent{Object: bound()}), "an address created")

	placeholder := func() *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "metallb-iad-system", Name: "p",
			Labels:      map[string]string{marks.LabelPlaceholder: names.PlaceholderAllocation, marks.LabelClaimUID: "u1"},
			Annotations: map[string]string{marks.AnnotationClaimNamespace: "t", marks.AnnotationClaimName: "ip"}}}
	}
	for name, tc := range map[string]struct {
		mut  func(*corev1.Service)
		want bool
	}{
		"MetalLB's status": {func(s *corev1.Service) {
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}}
			s.ResourceVersion = "2"
		}, false},
		"address recorded":   {func(s *corev1.Service) { s.Labels[marks.LabelAddress] = "ip-192-0-2-1" }, true},
		"claim named":        {func(s *corev1.Service) { s.Annotations[marks.AnnotationClaimName] = "other" }, true},
		"handed over":        {func(s *corev1.Service) { s.OwnerReferences = []metav1.OwnerReference{{Kind: "IPAddress", Name: "a"}} }, true},
		"deletion requested": {func(s *corev1.Service) { s.DeletionTimestamp = &metav1.Time{} }, false},
	} {
		n := placeholder()
		tc.mut(n)
		assert.Equal(t, tc.want, placeholderMarked.Update(event.UpdateEvent{ObjectOld: placeholder(), ObjectNew: n}), name)
	}
	assert.True(t, placeholderMarked.Create(event.CreateEvent{Object: placeholder()}), "a placeholder created, or seen at the start")
	assert.False(t, placeholderMarked.Delete(event.DeleteEvent{Object: placeholder()}), "a placeholder gone")
}
