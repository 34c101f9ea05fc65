package recorder

import (
	"fmt"
	"slices"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"

	"github.com/cozystack/metallb-iad/internal/marks"
)

// EchoToGateways is rec, recording every Event about a Service a second
// time on the Gateway the Service serves (gatewayEcho), and bounding every
// message. implementationNamespaces are where Gateway API implementations
// run the Services of Gateways elsewhere and no tenant writes: a Service
// there echoes to its Gateway in another namespace.
func EchoToGateways(rec record.EventRecorder, implementationNamespaces ...string) record.EventRecorder {
	return gatewayEcho{EventRecorder: rec, implementationNamespaces: implementationNamespaces}
}

// gatewayEcho records every Event about a Service a second time on the
// Gateway the Service serves (marks.GatewayOf), in the Service's own
// namespace, or in any from an implementation's namespace, whichever
// controller records it, so `kubectl describe
// gateway` answers what `kubectl describe service` does: the Gateway is
// what the tenant wrote, its Service is the implementation's. Without an
// owner reference the Gateway's uid is unknown, and the copy shows in
// `kubectl events --for gateway/NAME` but not in describe.
//
// It also bounds every message (Bounded), the echo's included.
type gatewayEcho struct {
	record.EventRecorder
	implementationNamespaces []string
}

// gatewayOf is the Event's Gateway and the prefix naming the Service.
func (e gatewayEcho) gatewayOf(obj runtime.Object) (*corev1.ObjectReference, string, bool) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return nil, "", false
	}
	gw, ok := marks.GatewayOf(svc)
	if !ok {
		return nil, "", false
	}
	ref, ok := gw.ReferenceIn(svc.Namespace)
	if !ok && slices.Contains(e.implementationNamespaces, svc.Namespace) {
		ref, ok = gw.Reference()
	}
	return ref, "Service " + svc.Namespace + "/" + svc.Name + ": ", ok
}

func (e gatewayEcho) Event(obj runtime.Object, eventtype, reason, message string) {
	message = Bounded(message)
	e.EventRecorder.Event(obj, eventtype, reason, message)
	if gw, about, ok := e.gatewayOf(obj); ok {
		e.EventRecorder.Event(gw, eventtype, reason, Bounded(about+message))
	}
}

func (e gatewayEcho) Eventf(obj runtime.Object, eventtype, reason, format string, args ...any) {
	e.Event(obj, eventtype, reason, fmt.Sprintf(format, args...))
}

func (e gatewayEcho) AnnotatedEventf(obj runtime.Object, annotations map[string]string, eventtype, reason, format string, args ...any) {
	message := Bounded(fmt.Sprintf(format, args...))
	e.EventRecorder.AnnotatedEventf(obj, annotations, eventtype, reason, "%s", message)
	if gw, about, ok := e.gatewayOf(obj); ok {
		e.EventRecorder.AnnotatedEventf(gw, annotations, eventtype, reason, "%s", Bounded(about+message))
	}
}

// MaxEventMessage bounds the message of every Event the driver records,
// in bytes: a message quotes what tenants wrote (names, MetalLB's words),
// and an Event is one object among thousands in the API server.
const MaxEventMessage = 1024

// Bounded is message cut to MaxEventMessage bytes at a character
// boundary, ending in "..." when it was cut.
func Bounded(message string) string {
	if len(message) <= MaxEventMessage {
		return message
	}
	cut := MaxEventMessage - len("...")
	for cut > 0 && !utf8.RuneStart(message[cut]) {
		cut--
	}
	return message[:cut] + "..."
}
