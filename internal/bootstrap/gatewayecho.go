package bootstrap

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"

	"github.com/cozystack/metallb-iad/internal/marks"
)

// gatewayEcho records every Event about a Service a second time on the
// Gateway the Service serves (marks.GatewayOf), whichever controller
// records it, so `kubectl describe
// gateway` answers what `kubectl describe service` does: the Gateway is
// what the tenant wrote, its Service is the implementation's. Without an
// owner reference the Gateway's uid is unknown, and the copy shows in
// `kubectl events --for gateway/NAME` but not in describe.
type gatewayEcho struct {
	record.EventRecorder
}

// gatewayOf is the Event's Gateway and the prefix naming the Service.
func gatewayOf(obj runtime.Object) (*corev1.ObjectReference, string, bool) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return nil, "", false
	}
	gw, ok := marks.GatewayOf(svc)
	if !ok {
		return nil, "", false
	}
	ref, ok := gw.Reference()
	return ref, "Service " + svc.Namespace + "/" + svc.Name + ": ", ok
}

func (e gatewayEcho) Event(obj runtime.Object, eventtype, reason, message string) {
	e.EventRecorder.Event(obj, eventtype, reason, message)
	if gw, about, ok := gatewayOf(obj); ok {
		e.EventRecorder.Event(gw, eventtype, reason, about+message)
	}
}

func (e gatewayEcho) Eventf(obj runtime.Object, eventtype, reason, format string, args ...any) {
	e.EventRecorder.Eventf(obj, eventtype, reason, format, args...)
	if gw, about, ok := gatewayOf(obj); ok {
		e.EventRecorder.Eventf(gw, eventtype, reason, about+format, args...)
	}
}

func (e gatewayEcho) AnnotatedEventf(obj runtime.Object, annotations map[string]string, eventtype, reason, format string, args ...any) {
	e.EventRecorder.AnnotatedEventf(obj, annotations, eventtype, reason, format, args...)
	if gw, about, ok := gatewayOf(obj); ok {
		e.EventRecorder.AnnotatedEventf(gw, annotations, eventtype, reason, about+format, args...)
	}
}
