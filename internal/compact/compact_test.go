package compact

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
)

// decoded is a key as a decoder makes it: its own bytes.
func decoded(s string) string { return strings.Clone(s) }

func TestObject(t *testing.T) {
	mk := func() *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{
			Name:          "web",
			Labels:        map[string]string{decoded("example.com/role"): "web"},
			Annotations:   map[string]string{decoded("example.com/note"): "a"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		}}
	}
	a, b := mk(), mk()
	labels := a.Labels
	for _, o := range []*corev1.Service{a, b} {
		got, err := Object(o)
		require.NoError(t, err)
		assert.Same(t, o, got)
	}
	assert.Nil(t, a.ManagedFields)
	assert.Equal(t, map[string]string{"example.com/role": "web"}, a.Labels)
	assert.Equal(t, map[string]string{"example.com/note": "a"}, b.Annotations)
	keyOf := func(m map[string]string) string {
		for k := range m {
			return k
		}
		return ""
	}
	assert.Equal(t, unsafe.StringData(keyOf(a.Labels)), unsafe.StringData(keyOf(b.Labels)), "one copy of a key for every object")
	assert.Equal(t, unsafe.StringData(keyOf(a.Annotations)), unsafe.StringData(keyOf(b.Annotations)))
	labels["changed"] = "x"
	assert.NotContains(t, a.Labels, "changed", "the decoded map is not the one kept")

	var none corev1.Service
	_, err := Object(&none)
	require.NoError(t, err)
	assert.Nil(t, none.Labels, "no labels stay none")
	got, err := Object("not an object")
	require.NoError(t, err)
	assert.Equal(t, "not an object", got)
}

func TestKeysBounded(t *testing.T) {
	keys.Lock()
	saved := keys.m
	keys.m = map[string]string{}
	for i := range maxKeys {
		keys.m[strings.Repeat("k", i+1)] = strings.Repeat("k", i+1)
	}
	keys.Unlock()
	defer func() {
		keys.Lock()
		keys.m = saved
		keys.Unlock()
	}()
	k := decoded("example.com/new")
	got := Keys(map[string]string{k: "v"})
	assert.Equal(t, map[string]string{"example.com/new": "v"}, got)
	keys.RLock()
	assert.Len(t, keys.m, maxKeys, "a full table takes no new key")
	keys.RUnlock()
}

func TestConditions(t *testing.T) {
	held := func() []metav1.Condition {
		return []metav1.Condition{{Type: "Held", Status: metav1.ConditionTrue, Reason: "HeldByPlaceholder",
			Message: "MetalLB assigned 192.0.2.1 to placeholder Service x/y", ObservedGeneration: 3, LastTransitionTime: metav1.Now()}}
	}
	state := []metav1.Condition{{Type: "Held", Status: metav1.ConditionTrue, Reason: "HeldByPlaceholder"}}
	tests := []struct {
		name      string
		transform func(any) (any, error)
		want      []metav1.Condition
	}{
		{name: "WithoutConditions", transform: WithoutConditions, want: nil},
		{name: "ConditionStates", transform: ConditionStates, want: state},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &iadv1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "core"}}}}
			a.Status.Conditions = held()
			decodedConds := a.Status.Conditions
			got, err := tt.transform(a)
			require.NoError(t, err)
			assert.Same(t, a, got)
			assert.Equal(t, tt.want, a.Status.Conditions)
			assert.Nil(t, a.ManagedFields, "and what Object does")
			assert.NotEmpty(t, decodedConds[0].Message, "the decoded slice is not changed")

			c := &iadv1alpha1.IPAddressClaim{}
			c.Status.Conditions = held()
			_, err = tt.transform(c)
			require.NoError(t, err)
			assert.Equal(t, tt.want, c.Status.Conditions, "a claim the same")

			svc := &corev1.Service{Status: corev1.ServiceStatus{Conditions: held()}}
			_, err = tt.transform(svc)
			require.NoError(t, err)
			assert.Equal(t, held()[0].Message, svc.Status.Conditions[0].Message, "any other kind keeps them")
		})
	}
}
