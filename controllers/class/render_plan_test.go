package class

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/classparams"
	"github.com/cozystack/metallb-iad/internal/marks"
)

func parsed(t *testing.T, raw string) classparams.Parameters {
	t.Helper()
	p, err := classparams.ParseParameters(&apiextensionsv1.JSON{Raw: []byte(raw)})
	require.NoError(t, err)
	return p
}

func TestRender(t *testing.T) {
	class := &iadv1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "public", UID: "uid-1"}}
	wantMeta := metav1.ObjectMeta{
		Namespace: "metallb-system",
		Name:      "iad-public",
		Labels: map[string]string{
			"app.kubernetes.io/managed-by":                 "metallb-iad",
			"metallb.drivers.local.sdn.cozystack.io/class": "public",
		},
	}

	t.Run("L2 by default", func(t *testing.T) {
		pool, adv := Render(class, parsed(t, `{"addresses": ["192.0.2.0/24", " 2001:DB8::1 - 2001:db8::ff "]}`), "metallb-system")
		assert.Equal(t, &metallbv1beta1.IPAddressPool{
			ObjectMeta: wantMeta,
			Spec: metallbv1beta1.IPAddressPoolSpec{
				Addresses:  []string{"192.0.2.0/24", "2001:db8::1-2001:db8::ff"},
				AutoAssign: ptr.To(false),
				// Only the Services the driver granted the class's addresses.
				AllocateTo: &metallbv1beta1.ServiceAllocation{ServiceSelectors: []metav1.LabelSelector{
					{MatchLabels: map[string]string{"metallb.drivers.local.sdn.cozystack.io/grant": "public"}},
				}},
			},
		}, pool)
		assert.Equal(t, &metallbv1beta1.L2Advertisement{
			ObjectMeta: wantMeta,
			Spec:       metallbv1beta1.L2AdvertisementSpec{IPAddressPools: []string{"iad-public"}},
		}, adv)
	})

	t.Run("L2 options and avoidBuggyIPs", func(t *testing.T) {
		pool, adv := Render(class, parsed(t, `{"addresses": ["192.0.2.0/24"], "avoidBuggyIPs": true,
			"l2": {"interfaces": ["eth1"], "nodeSelectors": [{"matchLabels": {"edge": "true"}}]}}`), "metallb-system")
		assert.True(t, pool.Spec.AvoidBuggyIPs)
		assert.Equal(t, ptr.To(false), pool.Spec.AutoAssign)
		assert.Equal(t, &metallbv1beta1.L2Advertisement{
			ObjectMeta: wantMeta,
			Spec: metallbv1beta1.L2AdvertisementSpec{
				IPAddressPools: []string{"iad-public"},
				Interfaces:     []string{"eth1"},
				NodeSelectors:  []metav1.LabelSelector{{MatchLabels: map[string]string{"edge": "true"}}},
			},
		}, adv)
	})

	t.Run("BGP with options passed through", func(t *testing.T) {
		pool, adv := Render(class, parsed(t, `{"addresses": ["192.0.2.0/24"], "advertisement": "BGP",
			"bgp": {"peers": ["tor-a"], "communities": ["65000:1"], "localPref": 150, "aggregationLength": 28, "aggregationLengthV6": 124}}`), "lb")
		meta := *wantMeta.DeepCopy()
		meta.Namespace = "lb"
		assert.Equal(t, "lb", pool.Namespace)
		assert.Equal(t, []string{"192.0.2.0/24"}, pool.Spec.Addresses)
		assert.Equal(t, &metallbv1beta1.BGPAdvertisement{
			ObjectMeta: meta,
			Spec: metallbv1beta1.BGPAdvertisementSpec{
				IPAddressPools:      []string{"iad-public"},
				Peers:               []string{"tor-a"},
				Communities:         []string{"65000:1"},
				LocalPref:           150,
				AggregationLength:   ptr.To[int32](28),
				AggregationLengthV6: ptr.To[int32](124),
			},
		}, adv)
	})

	t.Run("BGP with one aggregation length", func(t *testing.T) {
		_, adv := Render(class, parsed(t, `{"addresses": ["2001:db8::/64"], "advertisement": "BGP", "bgp": {"aggregationLengthV6": 64}}`), "metallb-system")
		spec := adv.(*metallbv1beta1.BGPAdvertisement).Spec
		assert.Equal(t, ptr.To[int32](32), spec.AggregationLength, "MetalLB's default")
		assert.Equal(t, ptr.To[int32](64), spec.AggregationLengthV6)
	})

	t.Run("BGP without options", func(t *testing.T) {
		_, adv := Render(class, parsed(t, `{"addresses": ["192.0.2.0/24"], "advertisement": "BGP"}`), "metallb-system")
		assert.Equal(t, &metallbv1beta1.BGPAdvertisement{
			ObjectMeta: wantMeta,
			Spec: metallbv1beta1.BGPAdvertisementSpec{
				IPAddressPools:      []string{"iad-public"},
				AggregationLength:   ptr.To[int32](32),
				AggregationLengthV6: ptr.To[int32](128),
			},
		}, adv)
	})
}

func TestTakeOver(t *testing.T) {
	older := metav1.OwnerReference{APIVersion: "local.sdn.cozystack.io/v1alpha1", Kind: "IPAddressClass", Name: "public", UID: "old", Controller: ptr.To(true)}
	otherClass := metav1.OwnerReference{APIVersion: "local.sdn.cozystack.io/v1alpha1", Kind: "IPAddressClass", Name: "gold", UID: "g", Controller: ptr.To(true)}
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "keep", UID: "cm"}
	boss := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "boss", UID: "d", Controller: ptr.To(true)}

	tests := []struct {
		name string
		in   []metav1.OwnerReference
		want []metav1.OwnerReference
		err  string
	}{
		{name: "none", in: nil, want: []metav1.OwnerReference{}},
		{name: "a reference to the class controlling it: someone else's doing, refused",
			in: []metav1.OwnerReference{other, older}, err: "it is controlled by IPAddressClass public already"},
		{name: "other owners kept", in: []metav1.OwnerReference{other}, want: []metav1.OwnerReference{other}},
		{name: "controlled by another class", in: []metav1.OwnerReference{otherClass}, err: "it is controlled by IPAddressClass gold already"},
		{name: "controlled by someone else", in: []metav1.OwnerReference{boss}, err: "it is controlled by Deployment boss already"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := TakeOver(tt.in)
			if tt.err != "" {
				require.Error(t, err)
				assert.Equal(t, tt.err, err.Error())
				return
			}
			require.NoError(t, err)
		})
	}
}

func TestMerge(t *testing.T) {
	class := &iadv1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "public"}}
	want, _ := Render(class, parsed(t, `{"addresses": ["192.0.2.0/28"]}`), "metallb-system")
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "keep", UID: "cm"}
	boss := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "boss", UID: "d", Controller: ptr.To(true)}

	live := &metallbv1beta1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{
		Labels:          map[string]string{"team": "net", marks.KeyClass: "stale"},
		Annotations:     map[string]string{marks.KeyRetained: "note", "other": "kept"},
		OwnerReferences: []metav1.OwnerReference{other},
	}, Spec: metallbv1beta1.IPAddressPoolSpec{Addresses: []string{"192.0.2.7/32"}}}
	require.NoError(t, merge(live, want, func() { live.Spec = want.Spec }))
	assert.Equal(t, map[string]string{"team": "net", marks.KeyClass: "public", marks.LabelManagedBy: ManagedBy}, live.Labels)
	assert.Equal(t, map[string]string{"other": "kept"}, live.Annotations)
	assert.Equal(t, []metav1.OwnerReference{other}, live.OwnerReferences)
	assert.Equal(t, want.Spec, live.Spec)

	taken := &metallbv1beta1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{boss}}}
	err := merge(taken, want, func() { t.Fatal("the spec of a pool controlled elsewhere is not set") })
	var elsewhere errControlledElsewhere
	require.ErrorAs(t, err, &elsewhere)
	assert.Equal(t, "cannot render IPAddressPool metallb-system/iad-public: it is controlled by Deployment boss already", elsewhere.msg)
}
