package soak

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

func TestChanges(t *testing.T) {
	a := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	b := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "b"}}
	type call struct{ old, cur *corev1.Service }
	var got []call
	h := changes(func(old, cur *corev1.Service) { got = append(got, call{old, cur}) })

	h.OnAdd(a, false)
	h.OnUpdate(a, b)
	h.OnDelete(b)
	h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "ns/a", Obj: a})
	h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "ns/x"}) // nothing known: no call

	assert.Equal(t, []call{{nil, a}, {a, b}, {b, nil}, {a, nil}}, got)
}
