package marks

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/names"
)

func svcWith(policy *corev1.IPFamilyPolicy, fams ...corev1.IPFamily) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "web"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, IPFamilyPolicy: policy, IPFamilies: fams},
	}
}

func TestReleasePinValue(t *testing.T) {
	dual := svcWith(ptr.To(corev1.IPFamilyPolicyRequireDualStack), corev1.IPv4Protocol, corev1.IPv6Protocol)
	assert.Equal(t, "::", ReleasePinValue(svcWith(nil, corev1.IPv4Protocol)), "a v4 Service gets an address of the other family")
	assert.Equal(t, "0.0.0.0", ReleasePinValue(svcWith(nil, corev1.IPv6Protocol)))
	assert.Equal(t, "0.0.0.0", ReleasePinValue(dual), "a dual-stack Service gets a single address")
	fromClusterIP := svcWith(nil)
	fromClusterIP.Spec.ClusterIPs = []string{"10.96.0.10"}
	assert.Equal(t, "::", ReleasePinValue(fromClusterIP), "families fall back to the cluster IPs")
	// The release pin never asks for a real address and never equals a pin.
	for _, s := range []*corev1.Service{svcWith(nil, corev1.IPv4Protocol), svcWith(nil, corev1.IPv6Protocol), dual} {
		ip, err := names.ParseAddress(ReleasePinValue(s))
		require.NoError(t, err)
		assert.True(t, ip.IsUnspecified())
	}
}

func TestIsReleasePin(t *testing.T) {
	for v, want := range map[string]bool{"0.0.0.0": true, "::": true, "203.0.113.7": false, "": false, "203.0.113.7,::": false} {
		assert.Equal(t, want, IsReleasePin(v), v)
	}
}

func TestReleaseAndWithdraw(t *testing.T) {
	shared := map[string]string{
		"keep": "me", KeyPin: "203.0.113.7", KeyPinnedBy: "ip",
		KeySharing: "k", KeySharedBy: "ip",
	}
	edited := func(in map[string]string, edit func(m *Marks)) map[string]string {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: in}}
		Edit(svc, edit)
		return svc.Annotations
	}
	released := edited(shared, func(m *Marks) { m.Release("::") })
	assert.Equal(t, map[string]string{"keep": "me", KeyPin: "::", KeyPinnedBy: "ip"}, released,
		"the release pin replaces the pin, the key goes, the pinned-by marker stays")
	assert.Equal(t, "203.0.113.7", shared[KeyPin], "the input is not modified")
	assert.Equal(t, map[string]string{"keep": "me"}, edited(released, (*Marks).Withdraw))
	assert.Equal(t, map[string]string{"keep": "me"}, edited(shared, (*Marks).Withdraw))
	assert.Equal(t, map[string]string{"keep": "me", KeyPinnedBy: "ip"}, edited(shared, func(m *Marks) { m.Release("") }),
		"a release by the grant: the pin goes")

	hand := map[string]string{KeyPin: "203.0.113.7", KeyPinnedBy: "ip", KeySharing: "team-a"}
	assert.Equal(t, map[string]string{KeyPin: "::", KeyPinnedBy: "ip", KeySharing: "team-a"},
		edited(hand, func(m *Marks) { m.Release("::") }), "a key without the shared-by marker is not the driver's")
	assert.Equal(t, map[string]string{KeySharing: "team-a"}, edited(hand, (*Marks).Withdraw))
}

// releasedAnn and withdrawnAnn are annotations after Release and Withdraw.
func releasedAnn(in map[string]string, release string) map[string]string {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: in}}
	Edit(svc, func(m *Marks) { m.Release(release) })
	return svc.Annotations
}

// withIP is a copy of a with its address set to ip.
func withIP(a *iadv1alpha1.IPAddress, ip string) *iadv1alpha1.IPAddress {
	out := a.DeepCopy()
	out.Spec.Address = ip
	return out
}

func withdrawnAnn(in map[string]string) map[string]string {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: in}}
	Edit(svc, (*Marks).Withdraw)
	return svc.Annotations
}

func TestReleasing(t *testing.T) {
	granted := map[string]string{LabelGrant: "public"}
	pinned := map[string]string{KeyPinnedBy: "ip", KeyPin: "203.0.113.7"}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		labels      map[string]string
		want        bool
	}{
		{"attached: pin, marker and grant", pinned, granted, false},
		{"pinned by the driver, grant not written yet", pinned, nil, false},
		{"the release pin", releasedAnn(pinned, "::"), nil, true},
		{"the release pin, grant label still there", releasedAnn(pinned, "::"), granted, true},
		{"released by grant: no pin, no grant, the marker stays", releasedAnn(pinned, ""), nil, true},
		{"no pin but still granted", releasedAnn(pinned, ""), granted, false},
		{"withdrawn: no marker", withdrawnAnn(pinned), nil, false},
		{"a tenant's own release-like pin, no marker", map[string]string{KeyPin: "::"}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := svcWith(nil, corev1.IPv4Protocol)
			svc.Annotations, svc.Labels = tc.annotations, tc.labels
			assert.Equal(t, tc.want, Of(svc).Releasing())
		})
	}
}

func TestLetGo(t *testing.T) {
	granted := map[string]string{LabelGrant: "public"}
	otherClass := map[string]string{LabelGrant: "private"}
	pinned := map[string]string{KeyPinnedBy: "ip", KeyPin: "203.0.113.7"}
	associated := &iadv1alpha1.IPAddress{
		Spec: iadv1alpha1.IPAddressSpec{ClassName: "public",
			ClaimRef: &iadv1alpha1.ClaimReference{Namespace: "tenant", Name: "ip"}},
		Status: iadv1alpha1.IPAddressStatus{AssociatedTo: &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "tenant", Name: "web"}},
	}
	elsewhere := associated.DeepCopy()
	elsewhere.Status.AssociatedTo.Name = "api"
	for _, tc := range []struct {
		name        string
		addr        *iadv1alpha1.IPAddress
		annotations map[string]string
		labels      map[string]string
		deleting    bool
		want        bool
	}{
		{"attached: pin, marker and grant", associated, pinned, granted, false, false},
		{"let go in one write: nothing of the driver's left", associated, withdrawnAnn(pinned), nil, false, true},
		{"the grant of another class: not the driver's one write", associated, withdrawnAnn(pinned), otherClass, false, false},
		{"released in two steps, the marker still there", associated, releasedAnn(pinned, ""), nil, false, false},
		{"the marker gone, the grant still there", associated, withdrawnAnn(pinned), granted, false, false},
		{"associated with another Service", elsewhere, withdrawnAnn(pinned), nil, false, false},
		{"not associated", &iadv1alpha1.IPAddress{Spec: associated.Spec}, withdrawnAnn(pinned), nil, false, false},
		{"being deleted: its deletion frees the address", associated, withdrawnAnn(pinned), nil, true, false},
		{"still asks for the claim: a gap handoff attaching it, not pinned yet", associated,
			map[string]string{iadv1alpha1.ServiceClaimAnnotation: "ip"}, nil, false, false},
		{"asks for another claim now", associated,
			map[string]string{iadv1alpha1.ServiceClaimAnnotation: "other"}, nil, false, true},
		{"pinned by hand to the address: MetalLB keeps it", withIP(associated, "203.0.113.7"),
			map[string]string{KeyPin: "203.0.113.7"}, nil, false, false},
		{"pinned by hand to it, the older annotation", withIP(associated, "203.0.113.7"),
			map[string]string{KeyLegacyPin: "203.0.113.9,203.0.113.7"}, nil, false, false},
		{"pinned by hand elsewhere: MetalLB lets the address go", withIP(associated, "203.0.113.7"),
			map[string]string{KeyPin: "203.0.113.9"}, nil, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := svcWith(nil, corev1.IPv4Protocol)
			svc.Annotations, svc.Labels = tc.annotations, tc.labels
			if tc.deleting {
				svc.DeletionTimestamp = &metav1.Time{}
			}
			assert.Equal(t, tc.want, LetGo(tc.addr, svc))
		})
	}
	assert.False(t, LetGo(associated, nil))
}
