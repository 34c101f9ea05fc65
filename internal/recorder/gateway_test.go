package recorder

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
)

// recorded is a recorder that keeps each Event's object with its words.
type recorded struct {
	record.FakeRecorder
	objects []runtime.Object
	said    []string
}

func (r *recorded) Event(obj runtime.Object, eventtype, reason, message string) {
	r.objects = append(r.objects, obj)
	r.said = append(r.said, eventtype+" "+reason+" "+message)
}

func (r *recorded) Eventf(obj runtime.Object, eventtype, reason, format string, args ...any) {
	r.Event(obj, eventtype, reason, format)
}

func TestGatewayEcho(t *testing.T) {
	gwService := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "envoy-web", UID: "svc",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "gateway.networking.k8s.io/v1", Kind: "Gateway", Name: "web", UID: "gw"}}}}
	plain := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "plain"}}
	rec := &recorded{}
	echo := gatewayEcho{EventRecorder: rec}

	echo.Event(plain, corev1.EventTypeNormal, "Associated", "attached")
	assert.Equal(t, []string{"Normal Associated attached"}, rec.said, "a plain Service's Event is said once")

	rec.objects, rec.said = nil, nil
	echo.Event(gwService, corev1.EventTypeWarning, "ClaimNotFound", "no claim")
	echo.Eventf(&corev1.Namespace{}, corev1.EventTypeNormal, "Other", "not a Service")
	assert.Equal(t, []string{
		"Warning ClaimNotFound no claim",
		"Warning ClaimNotFound Service team-a/envoy-web: no claim",
		"Normal Other not a Service",
	}, rec.said)
	assert.Equal(t, &corev1.ObjectReference{APIVersion: "gateway.networking.k8s.io/v1", Kind: "Gateway", Namespace: "team-a", Name: "web", UID: "gw"},
		rec.objects[1], "the copy names the Gateway with its uid, so kubectl describe gateway shows it")
}

// TestGatewayEchoStaysInTheNamespace: a tenant's Service labelled as
// serving a Gateway of another namespace gets its Event, and no Event goes
// to that namespace.
func TestGatewayEchoStaysInTheNamespace(t *testing.T) {
	forged := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "web", Labels: map[string]string{
		"gateway.envoyproxy.io/owning-gateway-name": "prod-gw", "gateway.envoyproxy.io/owning-gateway-namespace": "kube-system"}}}
	rec := &recorded{}
	gatewayEcho{EventRecorder: rec, implementationNamespaces: []string{"envoy-gateway-system"}}.Event(forged, corev1.EventTypeWarning, "GatewayInOtherNamespace", "refused")
	assert.Equal(t, []runtime.Object{forged}, rec.objects, "said on the Service alone")
}

// TestGatewayEchoFromAnImplementationNamespace: a Service in a namespace
// where an implementation runs the Services of Gateways elsewhere (and no
// tenant writes) echoes to the Gateway its labels name; a class's Service
// names no one Gateway.
func TestGatewayEchoFromAnImplementationNamespace(t *testing.T) {
	labelled := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "envoy-gateway-system", Name: "envoy-team-a-web", Labels: map[string]string{
		"gateway.envoyproxy.io/owning-gateway-name": "web", "gateway.envoyproxy.io/owning-gateway-namespace": "team-a"}}}
	merged := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "envoy-gateway-system", Name: "envoy-eg", Labels: map[string]string{
		"gateway.envoyproxy.io/owning-gatewayclass": "eg"}}}
	rec := &recorded{}
	echo := gatewayEcho{EventRecorder: rec, implementationNamespaces: []string{"envoy-gateway-system"}}
	echo.Event(labelled, corev1.EventTypeWarning, "GatewayInOtherNamespace", "refused")
	echo.Event(merged, corev1.EventTypeWarning, "GatewayInOtherNamespace", "refused")
	assert.Equal(t, []runtime.Object{
		labelled,
		&corev1.ObjectReference{APIVersion: "gateway.networking.k8s.io/v1", Kind: "Gateway", Namespace: "team-a", Name: "web"},
		merged,
	}, rec.objects)
	assert.Equal(t, "Warning GatewayInOtherNamespace Service envoy-gateway-system/envoy-team-a-web: refused", rec.said[1])
}

func TestBounded(t *testing.T) {
	assert.Equal(t, "short", Bounded("short"))
	exact := strings.Repeat("a", MaxEventMessage)
	assert.Equal(t, exact, Bounded(exact))
	long := Bounded(strings.Repeat("é", MaxEventMessage))
	assert.LessOrEqual(t, len(long), MaxEventMessage)
	assert.True(t, utf8.ValidString(long), "cut at a character boundary")
	assert.True(t, strings.HasSuffix(long, "..."))

	rec := &recorded{}
	gatewayEcho{EventRecorder: rec}.Eventf(&corev1.Namespace{}, corev1.EventTypeWarning, "ClaimNotFound", "claim %q", strings.Repeat("x", 300_000))
	require.Len(t, rec.said, 1)
	assert.LessOrEqual(t, len(rec.said[0]), len("Warning ClaimNotFound ")+MaxEventMessage, "every message is bounded")
}
