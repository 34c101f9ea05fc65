package marks

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
)

func service(labels map[string]string, kv ...string) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Labels: labels}}
	if len(kv) > 0 {
		s.Annotations = map[string]string{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		s.Annotations[kv[i]] = kv[i+1]
	}
	return s
}

func TestOf(t *testing.T) {
	svc := service(map[string]string{LabelGrant: "gold", "app": "web"},
		KeyPool, "p", KeyLegacyPool, "lp", KeyPin, "192.0.2.7", KeyLegacyPin, "192.0.2.8",
		KeySharing, "k", KeyLegacySharing, "lk", KeyPinnedBy, "c", KeySharedBy, "c",
		KeyOwnerPin, "192.0.2.9", KeyOwnerPool, "op", iadv1alpha1.ServiceClaimAnnotation, " c ")
	svc.Spec.LoadBalancerIP = "192.0.2.10"
	assert.Equal(t, Requests{Pool: "p", LegacyPool: "lp", Pin: "192.0.2.7", LegacyPin: "192.0.2.8",
		Sharing: "k", LegacySharing: "lk", PinnedBy: "c", SharedBy: "c", OwnerPin: "192.0.2.9", OwnerPool: "op", Grant: "gold"},
		Of(svc).Requests)
	m := Of(svc)
	assert.Equal(t, "c", m.Claim, "the claim request, trimmed")
	assert.Equal(t, "192.0.2.10", m.SpecPin)
	assert.False(t, m.Changed())
	assert.Equal(t, Requests{}, Of(&corev1.Service{}).Requests, "an unmarked Service")
}

func TestApply(t *testing.T) {
	for _, tc := range []struct {
		name       string
		svc        *corev1.Service
		edit       func(m *Marks)
		wantAnn    map[string]string
		wantLabels map[string]string
	}{
		{"nothing changed: nothing written, an empty mark of the owner's kept",
			service(nil, KeyPin, "", "other", "x"), func(*Marks) {},
			map[string]string{KeyPin: "", "other": "x"}, nil},
		{"a pin and the grant on an unmarked Service",
			service(nil), func(m *Marks) { m.Pin, m.Grant = "192.0.2.7", "gold" },
			map[string]string{KeyPin: "192.0.2.7"}, map[string]string{LabelGrant: "gold"}},
		{"an emptied mark is removed, other annotations and labels kept",
			service(map[string]string{LabelGrant: "gold", "app": "web"}, KeyPin, "192.0.2.7", KeyPinnedBy, "c", "other", "x"),
			func(m *Marks) { m.Pin, m.PinnedBy, m.Grant = "", "", "" },
			map[string]string{"other": "x"}, map[string]string{"app": "web"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.svc.DeepCopy()
			m := Of(tc.svc)
			tc.edit(&m)
			m.Apply(tc.svc)
			assert.Equal(t, tc.wantAnn, tc.svc.Annotations)
			assert.Equal(t, tc.wantLabels, tc.svc.Labels)
			if before.Annotations != nil && len(tc.wantAnn) != len(before.Annotations) {
				assert.NotEqual(t, before.Annotations, tc.svc.Annotations)
			}
		})
	}
	ann := map[string]string{KeyPin: "192.0.2.7"}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: ann}}
	Edit(svc, func(m *Marks) { m.Pin = "192.0.2.8" })
	assert.Equal(t, "192.0.2.7", ann[KeyPin], "the map read is not modified: a patch diffs against it")

	ph := Mark(&corev1.Service{}, Requests{Pool: "iad-gold", Pin: "192.0.2.7", Grant: "gold"})
	assert.Equal(t, map[string]string{KeyPool: "iad-gold", KeyPin: "192.0.2.7"}, ph.Annotations)
	assert.Equal(t, map[string]string{LabelGrant: "gold"}, ph.Labels)
}

func TestEdits(t *testing.T) {
	for _, tc := range []struct {
		name string
		svc  *corev1.Service
		edit func(m *Marks)
		want map[string]string
	}{
		{"pinFor with a key",
			service(nil, KeyPool, "other-pool"), func(m *Marks) { m.pinFor("c", "192.0.2.7", "k") },
			map[string]string{KeyPin: "192.0.2.7", KeyPinnedBy: "c", KeySharing: "k", KeySharedBy: "c", KeyOwnerPool: "other-pool"}},
		{"pinFor without a key withdraws the driver's key",
			service(nil, KeySharing, "k", KeySharedBy, "c"), func(m *Marks) { m.pinFor("c", "192.0.2.7", "") },
			map[string]string{KeyPin: "192.0.2.7", KeyPinnedBy: "c"}},
		{"pinFor without a key keeps the owner's key",
			service(nil, KeySharing, "team"), func(m *Marks) { m.pinFor("c", "192.0.2.7", "") },
			map[string]string{KeyPin: "192.0.2.7", KeyPinnedBy: "c", KeySharing: "team"}},
		{"takeOverPool keeps the first pool recorded",
			service(nil, KeyPool, "a", KeyLegacyPool, "b", KeyOwnerPool, "first"), func(m *Marks) { m.takeOverPool() },
			map[string]string{KeyOwnerPool: "first"}},
		{"Park: no pin, no key, the parking pool",
			service(nil, KeyPool, "iad-c", KeyLegacyPool, "iad-c", KeyPin, "192.0.2.7", KeyLegacyPin, "192.0.2.7",
				KeySharing, "k", KeyLegacySharing, "k", "class", "c"),
			func(m *Marks) { m.Park("park") },
			map[string]string{KeyPool: "park", "class": "c"}},
		{"Hold back from the parking pool",
			service(nil, KeyPool, "park", KeyLegacySharing, "x"), func(m *Marks) { m.Hold("192.0.2.7", "k", "iad-c") },
			map[string]string{KeyPool: "iad-c", KeyPin: "192.0.2.7", KeySharing: "k"}},
		{"Hold without a key takes the key away",
			service(nil, KeyPin, "192.0.2.8", KeySharing, "old"), func(m *Marks) { m.Hold("192.0.2.7", "", "") },
			map[string]string{KeyPin: "192.0.2.7"}},
		{"DropIP of one of two",
			service(nil, KeyPin, "192.0.2.7, 2001:db8::7", KeyPinnedBy, "c"), func(m *Marks) { assert.True(t, m.DropIP("192.0.2.7")) },
			map[string]string{KeyPin: "2001:db8::7", KeyPinnedBy: "c"}},
		{"DropIP of the last withdraws",
			service(nil, KeyPin, "192.0.2.7", KeyPinnedBy, "c", KeySharing, "k", KeySharedBy, "c"), func(m *Marks) { assert.True(t, m.DropIP("192.0.2.7")) },
			map[string]string{}},
		{"DropIP leaves a hand pin alone",
			service(nil, KeyPin, "192.0.2.7"), func(m *Marks) { assert.False(t, m.DropIP("192.0.2.7")) },
			map[string]string{KeyPin: "192.0.2.7"}},
		{"DropIP of an IP not pinned",
			service(nil, KeyPin, "192.0.2.7", KeyPinnedBy, "c"), func(m *Marks) { assert.False(t, m.DropIP("192.0.2.8")) },
			map[string]string{KeyPin: "192.0.2.7", KeyPinnedBy: "c"}},
		{"KeepOwnerPin",
			service(nil, KeyPin, "192.0.2.7", KeyPool, "p"), func(m *Marks) { m.KeepOwnerPin("192.0.2.7") },
			map[string]string{KeyPin: "192.0.2.7", KeyOwnerPin: "192.0.2.7", KeyOwnerPool: "p"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			Edit(tc.svc, tc.edit)
			assert.Equal(t, tc.want, tc.svc.Annotations)
		})
	}
	m := Of(service(nil, KeyPool, "a", KeyLegacyPool, "b"))
	assert.Equal(t, KeyPool+": a, "+KeyLegacyPool+": b (the value is kept in annotation "+KeyOwnerPool+")", m.takeOverPool())
	assert.Empty(t, m.takeOverPool(), "nothing left to move")
}

func TestReads(t *testing.T) {
	parked := Of(service(nil, KeyPool, "park"))
	assert.True(t, parked.Parked("park"))
	assert.False(t, parked.Parked(""), "parking off")
	assert.False(t, Of(service(nil, KeyPool, "iad-c")).Parked("park"), "the class pool")
	assert.False(t, Of(service(nil, KeyPool, "park", KeyPin, "192.0.2.7")).Parked("park"), "pinned")
	assert.False(t, Of(service(nil, KeyPool, "park", KeyLegacyPin, "192.0.2.7")).Parked("park"), "pinned, legacy")

	assert.True(t, Of(service(nil, KeyPin, "192.0.2.7")).PinnedExactly("192.0.2.7"))
	assert.False(t, Of(service(nil, KeyPin, "192.0.2.7,2001:db8::7")).PinnedExactly("192.0.2.7"))
	assert.Equal(t, []string{"192.0.2.7", "2001:db8::7"}, Of(service(nil, KeyPin, "192.0.2.7, 2001:db8:0::7, junk")).PinIPs())

	assert.True(t, Of(service(nil, KeySharing, "k")).KeyedExactly("k"))
	assert.False(t, Of(service(nil, KeySharing, "k", KeyLegacySharing, "k")).KeyedExactly("k"), "a legacy key beside")
	assert.True(t, Of(service(nil)).KeyedExactly(""), "no key")
	assert.False(t, Of(service(nil, KeySharing, "k")).KeyedExactly(""))

	assert.True(t, Of(service(map[string]string{LabelGrant: "gold"})).Granted("gold"))
	assert.False(t, Of(service(map[string]string{LabelGrant: "gold"})).Granted("silver"))
	assert.False(t, Of(service(nil)).Granted(""))

	hand := Of(service(nil, KeyLegacyPin, "2001:db8::7, 192.0.2.7"))
	assert.Equal(t, "192.0.2.7,2001:db8::7", hand.HandPin(), "canonical")
	assert.Empty(t, Of(service(nil, KeyPin, "192.0.2.7", KeyPinnedBy, "c")).HandPin(), "the driver's pin")
	spec := service(nil)
	spec.Spec.LoadBalancerIP = "192.0.2.7"
	assert.Equal(t, "192.0.2.7", Of(spec).HandPin())
}

func TestWithGrant(t *testing.T) {
	pool := &metallbv1beta1.IPAddressPool{}
	assert.False(t, RequiresGrant(pool, "public"))
	assert.False(t, RequiresGrant(nil, "public"))
	WithGrant(pool, "public")
	assert.True(t, RequiresGrant(pool, "public"))
	assert.False(t, RequiresGrant(pool, "private"))
	assert.Equal(t, []metav1.LabelSelector{{MatchLabels: map[string]string{LabelGrant: "public"}}}, pool.Spec.AllocateTo.ServiceSelectors)
	assert.Empty(t, pool.Spec.AllocateTo.Namespaces, "no namespace restriction")
	assert.Equal(t, LabelGrant+"=public", GrantText("public"))
}

// attached is in as Attach leaves it.
func attached(in map[string]string, claim, pin, key string) map[string]string {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: in}}
	Of(svc).Attach(svc, claim, pin, key, "")
	return svc.Annotations
}

func TestAttach(t *testing.T) {
	const key = "k"
	in := map[string]string{"keep": "me", iadv1alpha1.ServiceClaimAnnotation: "ip"}
	shared := attached(in, "ip", "203.0.113.7,2001:db8::7", key)
	assert.Equal(t, map[string]string{
		"keep": "me", iadv1alpha1.ServiceClaimAnnotation: "ip",
		KeyPin: "203.0.113.7,2001:db8::7", KeyPinnedBy: "ip",
		KeySharing: key, KeySharedBy: "ip",
	}, shared, "shared handoff: pin, key and both markers")
	assert.Equal(t, map[string]string{"keep": "me", iadv1alpha1.ServiceClaimAnnotation: "ip"}, in, "the input is not modified")

	gap := attached(shared, "ip", "203.0.113.7", "")
	assert.Equal(t, map[string]string{
		"keep": "me", iadv1alpha1.ServiceClaimAnnotation: "ip",
		KeyPin: "203.0.113.7", KeyPinnedBy: "ip",
	}, gap, "gap handoff: the key the driver wrote goes")

	hand := attached(map[string]string{KeySharing: "team-a"}, "ip", "203.0.113.7", "")
	assert.Equal(t, "team-a", hand[KeySharing], "a hand-written key is never touched")
	assert.Equal(t, map[string]string{KeyPin: "203.0.113.7", KeyPinnedBy: "ip"},
		attached(nil, "ip", "203.0.113.7", ""))

	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{KeyPin: "203.0.113.7", KeyPool: "p"}}}
	a := Of(svc).Attach(svc, "ip", "203.0.113.8", "k", "gold")
	assert.Equal(t, map[string]string{KeyPin: "203.0.113.7", KeyOwnerPool: "p"}, svc.Annotations, "a hand pin stays, the pool moves aside")
	assert.Equal(t, map[string]string{LabelGrant: "gold"}, svc.Labels, "granted, hand-pinned too")
	assert.Contains(t, a.Took, KeyPool+": p")
	assert.True(t, a.Hand && a.Changed, "beside a hand pin, the pool and the grant label change")

	pooled := attached(map[string]string{KeyPool: "legacy", KeyLegacyPool: "older"}, "ip", "203.0.113.7", "")
	assert.Equal(t, map[string]string{KeyPin: "203.0.113.7", KeyPinnedBy: "ip", KeyOwnerPool: "legacy"},
		pooled, "the pool requests, both spellings, go in the same write as the pin; the first is recorded")
}

func TestClaimNameProblem(t *testing.T) {
	for name, ok := range map[string]bool{
		"web-ip": true, "web.ip": true, "a": true, strings.Repeat("a", 253): true,
		"Web": false, "web_ip": false, "-web": false, strings.Repeat("a", 254): false, "web ip": false,
	} {
		assert.Equal(t, ok, ClaimNameProblem(name) == "", "%q", name)
	}
	assert.Equal(t, `"web"`, Shown("web"))
	long := Shown(strings.Repeat("é", 1000))
	assert.Less(t, len(long), 100, "a long value is quoted in part")
	assert.Contains(t, long, "(2000 bytes)")
}
