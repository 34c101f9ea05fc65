package class

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
)

func TestDesired(t *testing.T) {
	class := &iadv1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "public"}}
	p := parsed(t, `{"addresses": ["192.0.2.0/24"]}`)
	for _, tc := range []struct {
		grant bool
		want  bool
	}{{false, false}, {true, true}} {
		pool, adv := desired(class, p, "metallb-system", tc.grant)
		assert.Equal(t, tc.want, pool.Spec.AllocateTo != nil, "grant %v", tc.grant)
		assert.Equal(t, "iad-public", adv.GetName())
	}
}

func TestMsgRendered(t *testing.T) {
	class := &iadv1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "public"}}
	p := parsed(t, `{"addresses": ["192.0.2.0/28", "2001:db8::/120"], "advertisement": "BGP"}`)
	pool, adv := Render(class, p, "metallb-system")
	assert.Equal(t, "IPAddressPool metallb-system/iad-public with 192.0.2.0/28, 2001:db8::/120, announced by BGPAdvertisement iad-public: "+
		"created IPAddressPool iad-public, removed L2Advertisement iad-public",
		msgRendered("metallb-system", pool, adv, p, []string{"created IPAddressPool iad-public", "removed L2Advertisement iad-public"}))
}

func TestToWithdraw(t *testing.T) {
	obj := func(name string) client.Object {
		return &metallbv1beta1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	names := func(objs []client.Object) []string {
		var out []string
		for _, o := range objs {
			out = append(out, o.GetName())
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		candidates []client.Object
		kept       map[string]bool
		want       []string
	}{
		{"none", nil, nil, nil},
		{"kept ones stay", []client.Object{obj("iad-a"), obj("iad-old")}, map[string]bool{"L2Advertisement/iad-a": true}, []string{"iad-old"}},
		{"found by label and by name: deleted once", []client.Object{obj("iad-a"), obj("iad-a")}, nil, []string{"iad-a"}},
		{"a kept name of another kind does not keep this one", []client.Object{obj("iad-a")}, map[string]bool{"BGPAdvertisement/iad-a": true}, []string{"iad-a"}},
	} {
		assert.Equal(t, tc.want, names(toWithdraw("L2Advertisement", tc.candidates, tc.kept)), tc.name)
	}
}

func TestPlanRetain(t *testing.T) {
	addr := func(ip string) iadv1alpha1.IPAddress {
		return iadv1alpha1.IPAddress{Spec: iadv1alpha1.IPAddressSpec{Address: ip}}
	}
	pool := func(avoidBuggy bool, note string, addrs ...string) *metallbv1beta1.IPAddressPool {
		p := &metallbv1beta1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Name: "iad-gone"},
			Spec: metallbv1beta1.IPAddressPoolSpec{Addresses: addrs, AvoidBuggyIPs: avoidBuggy, AutoAssign: ptr.To(false)}}
		if note != "" {
			p.Annotations = map[string]string{AnnotationRetained: note}
		}
		return p
	}
	one := []iadv1alpha1.IPAddress{addr("192.0.2.7")}
	note := RetainedMessage("gone", []string{"192.0.2.7/32"})
	for _, tc := range []struct {
		name         string
		pool         *metallbv1beta1.IPAddressPool
		addrs        []iadv1alpha1.IPAddress
		wantWithdraw bool
		want         *metallbv1beta1.IPAddressPool
	}{
		{"no pool of the class", nil, one, true, nil},
		{"no address left", pool(false, "", "192.0.2.0/24"), nil, true, nil},
		{"narrowed, buggy IPs served, noted", pool(true, "", "192.0.2.0/24"), one, false, pool(false, note, "192.0.2.7/32")},
		{"already narrowed", pool(false, note, "192.0.2.7/32"), one, false, nil},
		{"the note is written back", pool(false, "", "192.0.2.7/32"), one, false, pool(false, note, "192.0.2.7/32")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before *metallbv1beta1.IPAddressPool
			if tc.pool != nil {
				before = tc.pool.DeepCopy()
			}
			got, withdraw := planRetain("gone", tc.pool, tc.addrs)
			assert.Equal(t, tc.wantWithdraw, withdraw)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, before, tc.pool, "the pool read is not changed")
		})
	}
}

func TestMerge(t *testing.T) {
	class := &iadv1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "public"}}
	want, _ := Render(class, parsed(t, `{"addresses": ["192.0.2.0/28"]}`), "metallb-system")
	classRef := metav1.OwnerReference{APIVersion: "local.sdn.cozystack.io/v1alpha1", Kind: "IPAddressClass", Name: "public", UID: "u", Controller: ptr.To(true)}
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "keep", UID: "cm"}
	boss := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "boss", UID: "d", Controller: ptr.To(true)}

	live := &metallbv1beta1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{
		Labels:          map[string]string{"team": "net", LabelClass: "stale"},
		Annotations:     map[string]string{AnnotationRetained: "note", "other": "kept"},
		OwnerReferences: []metav1.OwnerReference{classRef, other},
	}, Spec: metallbv1beta1.IPAddressPoolSpec{Addresses: []string{"192.0.2.7/32"}}}
	require.NoError(t, merge(live, want, func() { live.Spec = want.Spec }))
	assert.Equal(t, map[string]string{"team": "net", LabelClass: "public", LabelManagedBy: ManagedBy}, live.Labels)
	assert.Equal(t, map[string]string{"other": "kept"}, live.Annotations)
	assert.Equal(t, []metav1.OwnerReference{other}, live.OwnerReferences)
	assert.Equal(t, want.Spec, live.Spec)

	taken := &metallbv1beta1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{boss}}}
	err := merge(taken, want, func() { t.Fatal("the spec of a pool controlled elsewhere is not set") })
	var elsewhere errControlledElsewhere
	require.ErrorAs(t, err, &elsewhere)
	assert.Equal(t, "cannot render IPAddressPool metallb-system/iad-public: it is controlled by Deployment boss already", elsewhere.msg)
}

// TestRefuseOncePerChange: a refusal is an Event once per change of it,
// and again once the class was rendered in between.
func TestRefuseOncePerChange(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	r := &Reconciler{Deps: bootstrap.Deps{Recorder: rec}}
	class := &iadv1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: "refuse-unit", UID: "u1"}}
	t.Cleanup(func() { r.forgetClass(class.Name) })
	ctx := context.Background()
	overlap := &refusal{reason: ReasonOverlappingRanges, message: "overlap"}

	r.refuse(ctx, class, overlap)
	r.refuse(ctx, class, overlap)
	r.refuse(ctx, class, &refusal{reason: ReasonInvalidParameters, message: "bad"})
	r.reported.Forget(class.Name) // rendered
	r.refuse(ctx, class, overlap)
	close(rec.Events)
	var got []string
	for e := range rec.Events {
		got = append(got, e)
	}
	assert.Equal(t, []string{"Warning OverlappingRanges overlap", "Warning InvalidParameters bad", "Warning OverlappingRanges overlap"}, got)
}
