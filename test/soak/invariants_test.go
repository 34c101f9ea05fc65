package soak

import (
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/parking"
)

const phNS = "iad-system"

func addr(name, ip string, phase iadv1alpha1.IPAddressPhase, claimNS, claim string) *iadv1alpha1.IPAddress {
	a := &iadv1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
		Spec:   iadv1alpha1.IPAddressSpec{Address: ip, ClassName: "c", ReclaimPolicy: iadv1alpha1.ReclaimRetain},
		Status: iadv1alpha1.IPAddressStatus{Phase: phase}}
	if claim != "" {
		a.Spec.ClaimRef = &iadv1alpha1.ClaimReference{Namespace: claimNS, Name: claim}
	}
	return a
}

func svc(ns, name string, ann, labels map[string]string, ips ...string) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann, Labels: labels},
		Spec: corev1.ServiceSpec{IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}}}
	for _, ip := range ips {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
	return s
}

func hold(a *iadv1alpha1.IPAddress, ns string) *corev1.Service {
	return svc(ns, "hold-"+a.Name, nil, map[string]string{marks.LabelPlaceholder: names.PlaceholderHold, marks.LabelAddress: a.Name}, a.Spec.Address)
}

func TestDoubleHoldAllowed(t *testing.T) {
	a := addr("ip-10-77-0-1", "10.77.0.1", iadv1alpha1.AddressBound, "t", "web-ip")
	pinned := svc("t", "web", map[string]string{marks.KeyPinnedBy: "web-ip"}, nil, "10.77.0.1")
	plain := svc("t", "other", nil, nil, "10.77.0.1")
	elsewhere := svc("u", "web", map[string]string{marks.KeyPinnedBy: "web-ip"}, nil, "10.77.0.1")
	attached := a.DeepCopy()
	attached.Status.AssociatedTo = &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "t", Name: "other"}
	conflict := a.DeepCopy()
	conflict.Status.Phase = iadv1alpha1.AddressConflict
	for _, tc := range []struct {
		name    string
		a       *iadv1alpha1.IPAddress
		holders []*corev1.Service
		want    bool
	}{
		{"one holder", a, []*corev1.Service{pinned}, true},
		{"shared handoff: placeholder and the marked Service", a, []*corev1.Service{hold(a, phNS), pinned}, true},
		{"shared handoff or attachment: placeholder and the attached Service", attached, []*corev1.Service{hold(a, phNS), plain}, true},
		{"placeholder and an unmarked Service", a, []*corev1.Service{hold(a, phNS), plain}, false},
		{"placeholder and a marked Service of another namespace", a, []*corev1.Service{hold(a, phNS), elsewhere}, false},
		{"a placeholder-looking Service outside the placeholder namespace", a, []*corev1.Service{hold(a, "t"), pinned}, false},
		{"two placeholders", a, []*corev1.Service{hold(a, phNS), hold(a, phNS)}, false},
		{"three holders in a handoff", a, []*corev1.Service{hold(a, phNS), pinned, plain}, false},
		{"anything while in Conflict", conflict, []*corev1.Service{hold(a, phNS), plain, elsewhere}, true},
		{"no address records the IP", nil, []*corev1.Service{plain, elsewhere}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, DoubleHoldAllowed(tc.a, tc.holders, phNS))
		})
	}
}

func TestClaimLoss(t *testing.T) {
	bound := &iadv1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "c", UID: "1"},
		Status: iadv1alpha1.IPAddressClaimStatus{Phase: iadv1alpha1.ClaimBound,
			Addresses: []iadv1alpha1.ClaimedAddress{{Name: "a4", Address: "10.0.0.1"}, {Name: "a6", Address: "fd00::1"}}}}
	same := bound.DeepCopy()
	lostOne := bound.DeepCopy()
	lostOne.Status.Addresses = lostOne.Status.Addresses[:1]
	lostOne.Status.Phase = iadv1alpha1.ClaimLost
	deleting := lostOne.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	pending := bound.DeepCopy()
	pending.Status.Phase = iadv1alpha1.ClaimPending

	lost, left := ClaimLoss(bound, same)
	assert.Empty(t, lost)
	assert.False(t, left)
	lost, left = ClaimLoss(bound, lostOne)
	assert.Equal(t, []string{"a6"}, lost)
	assert.True(t, left)
	lost, left = ClaimLoss(bound, deleting)
	assert.Empty(t, lost, "a claim being deleted gives its addresses up")
	assert.False(t, left)
	_, left = ClaimLoss(bound, pending)
	assert.True(t, left)
	lost, left = ClaimLoss(pending, bound)
	assert.Empty(t, lost, "a claim that was not Bound has nothing to lose")
	assert.False(t, left)
}

func TestCheckFinal(t *testing.T) {
	held := addr("ip-10-77-0-1", "10.77.0.1", iadv1alpha1.AddressBound, "t", "a")
	att := addr("ip-10-77-0-2", "10.77.0.2", iadv1alpha1.AddressBound, "t", "b")
	att.Status.AssociatedTo = &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "t", Name: "web"}
	web := svc("t", "web", map[string]string{marks.KeyPinnedBy: "b", iadv1alpha1.ServiceClaimAnnotation: "b"}, nil, "10.77.0.2")
	claimB := iadv1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "b", UID: "cb"},
		Spec: iadv1alpha1.IPAddressClaimSpec{Family: iadv1alpha1.FamilyIPv4}, Status: iadv1alpha1.IPAddressClaimStatus{Phase: iadv1alpha1.ClaimBound}}
	good := func() *State {
		return &State{
			Services:  []corev1.Service{*hold(held, phNS), *web},
			Addresses: []iadv1alpha1.IPAddress{*held, *att},
			Claims:    []iadv1alpha1.IPAddressClaim{claimB},
		}
	}
	retain := map[string]string{held.Name: string(held.UID)}
	checks, findings := CheckFinal(good(), phNS, retain)
	assert.Empty(t, findings)
	assert.Equal(t, 1, checks[FinalHeld])
	assert.Equal(t, 1, checks[FinalAttached])
	assert.Equal(t, 1, checks[FinalRetain])

	// A shared attachment: the hold placeholder holds the IP beside the
	// Service, which carries the driver's sharing key.
	shared := good()
	shared.Services[1].Annotations = map[string]string{marks.KeyPinnedBy: "b", iadv1alpha1.ServiceClaimAnnotation: "b", marks.KeySharedBy: "b"}
	shared.Services = append(shared.Services, *hold(att, phNS))
	checks, findings = CheckFinal(shared, phNS, retain)
	assert.Empty(t, findings, "placeholder and Service both hold the IP of a shared attachment")
	assert.Equal(t, 1, checks[FinalSharedHold])

	// A parked handoff: the hold waits in the parking pool, on an address
	// of its own.
	parked := good()
	ph := hold(att, phNS)
	ph.Annotations = map[string]string{marks.KeyPool: parking.DefaultPool}
	ph.Status.LoadBalancer.Ingress[0].IP = "240.0.0.1"
	parked.Services = append(parked.Services, *ph)
	_, findings = CheckFinal(parked, phNS, retain)
	assert.Empty(t, findings, "the parked hold of an attached address")

	for _, tc := range []struct {
		name   string
		break_ func(s *State)
		kind   string
	}{
		{"hold placeholder gone", func(s *State) { s.Services = s.Services[1:] }, FinalHeld},
		{"attached Service lost its marker", func(s *State) { delete(s.Services[1].Annotations, marks.KeyPinnedBy) }, FinalAttached},
		{"attached Service holds another IP", func(s *State) { s.Services[1].Status.LoadBalancer.Ingress[0].IP = "10.77.0.3" }, FinalAttached},
		{"orphan placeholder", func(s *State) { s.Addresses = s.Addresses[1:] }, FinalOrphans},
		{"release pin left", func(s *State) {
			s.Services = append(s.Services, *svc("t", "old", map[string]string{marks.KeyPin: "::"}, nil))
		}, FinalMarkers},
		{"marker on a detached Service", func(s *State) {
			s.Services = append(s.Services, *svc("t", "old", map[string]string{marks.KeySharedBy: "b"}, nil))
		}, FinalMarkers},
		{"leak", func(s *State) { s.Services = append(s.Services, *svc("x", "plain", nil, nil, "10.77.1.5")) }, FinalLeak},
		{"double hold at rest", func(s *State) { s.Services = append(s.Services, *svc("x", "plain", nil, nil, "10.77.0.2")) }, FinalDoubleHold},
		{"placeholder beside a Service attached without sharing", func(s *State) { s.Services = append(s.Services, *hold(att, phNS)) }, FinalOrphans},
		{"parked placeholder of an unattached address", func(s *State) {
			s.Services[0].Annotations = map[string]string{marks.KeyPool: parking.DefaultPool}
			s.Services[0].Status.LoadBalancer.Ingress[0].IP = "240.0.0.1"
		}, FinalHeld},
		{"shared attachment without its hold", func(s *State) { s.Services[1].Annotations[marks.KeySharedBy] = "b" }, FinalSharedHold},
		{"shared attachment with two holds", func(s *State) {
			s.Services[1].Annotations[marks.KeySharedBy] = "b"
			s.Services = append(s.Services, *hold(att, phNS), *svc(phNS, "hold2", nil, map[string]string{marks.LabelPlaceholder: names.PlaceholderHold, marks.LabelAddress: att.Name}, att.Spec.Address))
		}, FinalSharedHold},
		{"Conflict left", func(s *State) { s.Addresses[0].Status.Phase = iadv1alpha1.AddressConflict }, FinalPhases},
		{"Retain address gone", func(s *State) { s.Addresses[0].UID = "recreated" }, FinalRetain},
		{"annotated Service never attached", func(s *State) {
			s.Addresses[1].Status.AssociatedTo = nil
			s.Services = append(s.Services, *hold(att, phNS))
			delete(s.Services[1].Annotations, marks.KeyPinnedBy)
			s.Services[1].Status.LoadBalancer.Ingress = nil
		}, FinalAttachLives},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := good()
			s.Services[1] = *web.DeepCopy()
			tc.break_(s)
			_, findings := CheckFinal(s, phNS, retain)
			require.NotEmpty(t, findings)
			var kinds []string
			for _, f := range findings {
				kinds = append(kinds, f.Kind)
			}
			assert.Contains(t, kinds, tc.kind)
		})
	}
}

func TestUniverse(t *testing.T) {
	assert.True(t, Universe("10.77.0.0"))
	assert.True(t, Universe("10.77.2.7"))
	assert.False(t, Universe("10.77.2.8"))
	assert.True(t, Universe("fd00:77:1::7"))
	assert.True(t, Universe("::ffff:10.77.1.3"))
	assert.False(t, Universe("fd00:77:1::8"))
	assert.False(t, Universe("10.96.0.1"))
	assert.Equal(t, []string{"10.77.2.0-10.77.2.3", "fd00:77:2::-fd00:77:2::3"}, Classes[2].Ranges(4))
}

func TestScheduleAndTargets(t *testing.T) {
	assert.Equal(t, []int{25, 50, 75}, schedule(100, 3))
	assert.Empty(t, schedule(100, 0))
	targets := killTargets(rand.New(rand.NewSource(7)), 50)
	count := map[string]int{}
	for _, x := range targets {
		count[x]++
	}
	assert.Equal(t, map[string]int{"class": 10, "claim": 10, "service": 10, "ipaddress": 10, "metallb": 10}, count,
		"kills spread evenly over the four controllers and MetalLB")
	assert.Equal(t, targets, killTargets(rand.New(rand.NewSource(7)), 50), "the same seed picks the same targets")
}

func TestFromEnv(t *testing.T) {
	t.Setenv("SOAK_SEED", "42")
	t.Setenv("SOAK_OPS", "5000")
	t.Setenv("SOAK_DURATION", "20m")
	c, err := FromEnv(Short())
	require.NoError(t, err)
	assert.Equal(t, int64(42), c.Seed)
	assert.Equal(t, 5000, c.Ops)
	assert.Equal(t, 20*time.Minute, c.Duration)
	t.Setenv("SOAK_KILLS", "many")
	_, err = FromEnv(Short())
	assert.ErrorContains(t, err, "SOAK_KILLS")
}

func TestCheckWarm(t *testing.T) {
	warm := func(name, ip string) iadv1alpha1.IPAddress {
		a := addr(name, ip, iadv1alpha1.AddressAvailable, "", "")
		a.Spec.ClassName = "w"
		a.Spec.Source.FromClass = &iadv1alpha1.FromClassSource{}
		return *a
	}
	bound := func(name, ip string) iadv1alpha1.IPAddress {
		a := addr(name, ip, iadv1alpha1.AddressBound, "t", name)
		a.Spec.ClassName = "w"
		a.Spec.Source.FromClass = &iadv1alpha1.FromClassSource{}
		return *a
	}
	v4 := []iadv1alpha1.IPAddress{warm("a", "10.77.3.0"), warm("b", "10.77.3.1")}
	v6 := []iadv1alpha1.IPAddress{warm("c", "fd00:77:3::"), warm("d", "fd00:77:3::1")}
	for _, tc := range []struct {
		name  string
		addrs []iadv1alpha1.IPAddress
		class WarmClass
		bad   int
	}{
		{"two of each family, two asked for", append(slices.Clone(v4), v6...), WarmClass{Size: 8, Warm: 2}, 0},
		{"one IPv6 address short", append(slices.Clone(v4), v6[0]), WarmClass{Size: 8, Warm: 2}, 1},
		{"one more than asked for in each family", append(slices.Clone(v4), v6...), WarmClass{Size: 8, Warm: 1}, 2},
		{"none asked for, none kept", nil, WarmClass{Size: 8, Warm: 0}, 0},
		{"the rest of the ledger leaves room for one", append([]iadv1alpha1.IPAddress{v4[0], v6[0]},
			bound("e", "10.77.3.2"), bound("f", "10.77.3.3"), bound("g", "fd00:77:3::2"), bound("h", "fd00:77:3::3")),
			WarmClass{Size: 3, Warm: 2}, 0},
		{"a Bound address is not warm", []iadv1alpha1.IPAddress{bound("e", "10.77.3.2"), v6[0]}, WarmClass{Size: 8, Warm: 1}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checks, findings := CheckWarm(&State{Addresses: tc.addrs}, map[string]WarmClass{"w": tc.class})
			assert.Equal(t, 2, checks, "one check per family")
			assert.Len(t, findings, tc.bad, "%v", findings)
		})
	}
}
