package warm

import (
	"cmp"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/claim/draw"
	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
)

func warmAddr(name, ip string, ref *iadv1alpha1.ClaimReference, phase iadv1alpha1.IPAddressPhase, warmLabel bool) iadv1alpha1.IPAddress {
	a := iadv1alpha1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: iadv1alpha1.IPAddressSpec{Address: ip, ClassName: "c", ClaimRef: ref,
			Source: iadv1alpha1.IPAddressSource{FromClass: &iadv1alpha1.FromClassSource{}}},
		Status: iadv1alpha1.IPAddressStatus{Phase: phase},
	}
	if warmLabel {
		a.Labels = map[string]string{marks.LabelWarm: "true"}
	}
	return a
}

func warmPH(name string, f iadv1alpha1.IPFamily, ip string) *corev1.Service {
	ph := draw.RenderWarmPlaceholder("ph", "c", f)
	ph.Name = name
	if ip != "" {
		ph.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
	}
	return ph
}

func svcNames(svcs []*corev1.Service) []string {
	var out []string
	for _, s := range svcs {
		out = append(out, s.Name)
	}
	return out
}

func addrNames(as []*iadv1alpha1.IPAddress) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.Name)
	}
	return out
}

func TestPlanWarm(t *testing.T) {
	v4 := iadv1alpha1.FamilyIPv4
	bound := &iadv1alpha1.ClaimReference{Namespace: "t", Name: "x"}
	avail := iadv1alpha1.AddressAvailable
	tests := []struct {
		name             string
		target           int
		size             float64
		addrs            []iadv1alpha1.IPAddress
		phs              []*corev1.Service
		create           int
		full             bool
		waiting          int
		record           []string
		dropPlaceholders []string
		dropAddresses    []string
		// ranges are the class's; 10.0.0.0/24 when empty.
		ranges string
	}{
		{name: "nothing asked, nothing there", target: 0, size: 16},
		{name: "empty class fills to the target", target: 3, size: 16, create: 3},
		{name: "bound addresses do not count as warm", target: 2, size: 16,
			addrs:  []iadv1alpha1.IPAddress{warmAddr("ip-a", "10.0.0.1", bound, iadv1alpha1.AddressBound, true)},
			create: 2},
		{name: "Available and not-yet-phased addresses count", target: 3, size: 16,
			addrs: []iadv1alpha1.IPAddress{
				warmAddr("ip-a", "10.0.0.1", nil, avail, true),
				warmAddr("ip-b", "10.0.0.2", nil, "", true),
			},
			create: 1},
		{name: "Released and Conflict addresses are not warm", target: 1, size: 16,
			addrs: []iadv1alpha1.IPAddress{
				warmAddr("ip-a", "10.0.0.1", bound, iadv1alpha1.AddressReleased, false),
				warmAddr("ip-b", "10.0.0.2", nil, iadv1alpha1.AddressConflict, true),
			},
			create: 1},
		{name: "placeholders in flight count; assigned ones are recorded", target: 3, size: 16,
			phs:    []*corev1.Service{warmPH("warm-1", v4, ""), warmPH("warm-2", v4, "10.0.0.9")},
			create: 1, record: []string{"warm-2"}, waiting: 1},
		{name: "other family's placeholders do not count", target: 1, size: 16,
			phs:    []*corev1.Service{warmPH("warm-6", iadv1alpha1.FamilyIPv6, "")},
			create: 1},
		{name: "no room left in the ranges: ask MetalLB for nothing", target: 4, size: 3,
			addrs: []iadv1alpha1.IPAddress{
				warmAddr("ip-a", "10.0.0.1", bound, iadv1alpha1.AddressBound, false),
				warmAddr("ip-b", "10.0.0.2", nil, avail, true),
			},
			phs:    []*corev1.Service{warmPH("warm-1", v4, "")},
			create: 0, full: true, waiting: 1},
		{name: "room for part of the target", target: 4, size: 3,
			addrs:  []iadv1alpha1.IPAddress{warmAddr("ip-b", "10.0.0.2", nil, avail, true)},
			create: 2, full: true},
		{name: "surplus: waiting placeholders first, then the last warm names", target: 1, size: 16,
			addrs: []iadv1alpha1.IPAddress{
				warmAddr("ip-10-0-0-1", "10.0.0.1", nil, avail, true),
				warmAddr("ip-10-0-0-2", "10.0.0.2", nil, avail, true),
				warmAddr("ip-10-0-0-3", "10.0.0.3", nil, avail, true),
			},
			phs:              []*corev1.Service{warmPH("warm-1", v4, "")},
			dropPlaceholders: []string{"warm-1"}, dropAddresses: []string{"ip-10-0-0-3", "ip-10-0-0-2"}},
		{name: "surplus of waiting placeholders: the rest keep waiting", target: 1, size: 16,
			phs:              []*corev1.Service{warmPH("warm-1", v4, ""), warmPH("warm-2", v4, ""), warmPH("warm-3", v4, "")},
			dropPlaceholders: []string{"warm-1", "warm-2"}, waiting: 1},
		{name: "surplus never drops an address the driver did not make warm", target: 0, size: 16,
			addrs: []iadv1alpha1.IPAddress{
				warmAddr("ip-10-0-0-1", "10.0.0.1", nil, avail, false),
				warmAddr("ip-10-0-0-2", "10.0.0.2", nil, avail, true),
			},
			dropAddresses: []string{"ip-10-0-0-2"}},
		{name: "ranges edited: our warm addresses outside them go, nothing new is asked for", target: 2, size: 8, ranges: "10.0.1.0/29",
			addrs: []iadv1alpha1.IPAddress{
				warmAddr("ip-10-0-0-1", "10.0.0.1", nil, avail, true),
				warmAddr("ip-10-0-0-2", "10.0.0.2", nil, avail, true),
			},
			phs:              []*corev1.Service{warmPH("warm-1", v4, ""), warmPH("warm-2", v4, "10.0.0.3")},
			dropPlaceholders: []string{"warm-1", "warm-2"}, dropAddresses: []string{"ip-10-0-0-1", "ip-10-0-0-2"}},
		{name: "ranges edited over a bound address: it stays, nothing new is asked for", target: 2, size: 8, ranges: "10.0.1.0/29",
			addrs: []iadv1alpha1.IPAddress{
				warmAddr("ip-10-0-0-1", "10.0.0.1", bound, iadv1alpha1.AddressBound, true),
				warmAddr("ip-10-0-0-2", "10.0.0.2", nil, avail, false),
			}},
		{name: "every address inside: a placeholder given an old address waits for the new pool", target: 2, size: 8, ranges: "10.0.1.0/29",
			addrs: []iadv1alpha1.IPAddress{warmAddr("ip-10-0-1-1", "10.0.1.1", nil, avail, true)},
			phs:   []*corev1.Service{warmPH("warm-1", v4, "10.0.0.3")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cidr := cmp.Or(tc.ranges, "10.0.0.0/24")
			ranges, err := classparams.ParseParameters(&apiextensionsv1.JSON{Raw: fmt.Appendf(nil, `{"addresses":[%q]}`, cidr)})
			require.NoError(t, err)
			p := planWarm(v4, tc.target, tc.size, ranges.Addresses, tc.addrs, tc.phs)
			assert.Equal(t, tc.create, p.create, "create")
			assert.Equal(t, tc.full, p.full, "full")
			assert.Equal(t, tc.waiting, p.waiting, "waiting")
			assert.Equal(t, tc.record, svcNames(p.record), "record")
			assert.Equal(t, tc.dropPlaceholders, svcNames(p.dropPlaceholders), "drop placeholders")
			assert.Equal(t, tc.dropAddresses, addrNames(p.dropAddresses), "drop addresses")
		})
	}
}

func TestWarmTarget(t *testing.T) {
	cls := func(provisioner, params string) *iadv1alpha1.IPAddressClass {
		c := &iadv1alpha1.IPAddressClass{Spec: iadv1alpha1.IPAddressClassSpec{Provisioner: provisioner}}
		if params != "" {
			c.Spec.Parameters = &apiextensionsv1.JSON{Raw: []byte(params)}
		}
		return c
	}
	n, ranges, served := warmTarget(cls(names.Provisioner, `{"addresses":["10.0.0.0/28","fd00::/120"],"warmAddresses":4}`))
	assert.True(t, served)
	assert.Equal(t, 4, n)
	v4, v6 := classparams.FamilySizes(ranges)
	assert.Equal(t, []float64{16, 256}, []float64{v4, v6})

	n, _, served = warmTarget(cls(names.Provisioner, `{"addresses":["10.0.0.0/28"]}`))
	assert.True(t, served)
	assert.Zero(t, n, "warmAddresses defaults to 0")

	n, _, served = warmTarget(cls(names.Provisioner, `{"addresses":["10.0.0.0/28"],"warmAddresses":"x"}`))
	assert.True(t, served)
	assert.Equal(t, -1, n, "parameters that do not parse change nothing")

	_, _, served = warmTarget(cls("other.example.org", `{"addresses":["10.0.0.0/28"],"warmAddresses":4}`))
	assert.False(t, served)
	_, _, served = warmTarget(nil)
	assert.False(t, served)
}

func TestIsOurWarm(t *testing.T) {
	avail := iadv1alpha1.AddressAvailable
	ours := warmAddr("ip-a", "10.0.0.1", nil, avail, true)
	assert.True(t, isOurWarm(&ours, "c"))
	notLabelled := warmAddr("ip-a", "10.0.0.1", nil, avail, false)
	assert.False(t, isOurWarm(&notLabelled, "c"), "an address the driver did not record as warm")
	otherClass := warmAddr("ip-a", "10.0.0.1", nil, avail, true)
	assert.False(t, isOurWarm(&otherClass, "d"))
	bound := warmAddr("ip-a", "10.0.0.1", &iadv1alpha1.ClaimReference{Namespace: "t", Name: "x"}, iadv1alpha1.AddressBound, true)
	assert.False(t, isOurWarm(&bound, "c"), "a warm address bound since is someone's")
	attached := warmAddr("ip-a", "10.0.0.1", nil, avail, true)
	attached.Status.AssociatedTo = &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "t", Name: "web"}
	assert.False(t, isOurWarm(&attached, "c"))
}

func TestWarmClassOf(t *testing.T) {
	const ns = "metallb-iad-system"
	warm := warmAddr("a", "192.0.2.1", nil, iadv1alpha1.AddressAvailable, true)
	taken := warmAddr("b", "192.0.2.2", &iadv1alpha1.ClaimReference{Namespace: "t", Name: "ip"}, iadv1alpha1.AddressBound, false)
	svc := func(namespace, kind string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "p",
			Labels: map[string]string{marks.LabelPlaceholder: kind}, Annotations: map[string]string{marks.KeyClass: "c"}}}
	}
	for name, tc := range map[string]struct {
		o     client.Object
		class string
		warm  bool
	}{
		"a warm address":            {&warm, "c", true},
		"a claim's address":         {&taken, "c", false},
		"a warm placeholder":        {svc(ns, names.PlaceholderWarm), "c", true},
		"an allocation placeholder": {svc(ns, names.PlaceholderAllocation), "c", false},
		"a Service elsewhere":       {svc("t", names.PlaceholderWarm), "", false},
		"a class":                   {&iadv1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, "", false},
	} {
		class, isWarm := warmClassOf(tc.o, ns)
		assert.Equal(t, tc.class, class, name)
		assert.Equal(t, tc.warm, isWarm, name)
	}
}
