package marks

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The marks a Gateway API implementation leaves on the Service it creates
// for a Gateway. The driver only reads them.
const (
	// GatewayGroup is Gateway API's group; an owner reference of kind
	// Gateway in it names the Gateway the Service serves, in the Service's
	// own namespace (Envoy Gateway's Gateway Namespace mode, and
	// implementations that always run a Gateway's proxy beside it).
	GatewayGroup = "gateway.networking.k8s.io"
)

// Gateway is the Gateway a Service serves, as the implementation marked it.
type Gateway struct {
	Namespace, Name string
	// Class is set instead of Name for a Service serving every Gateway of
	// a GatewayClass, which lives in no tenant's namespace.
	Class string
	// Several is set for a Service owned by more than one Gateway.
	Several bool
	// UID is the Gateway's, when an owner reference gives it: Events about
	// the Gateway reach `kubectl describe gateway` only with it.
	UID types.UID
}

// GatewayOf is the Gateway svc serves; ok is false for a Service no
// Gateway API implementation marked as its own.
//
// A tenant who may write a Gateway may also write labels that reach its
// Service (spec.infrastructure.labels, an EnvoyProxy's Service labels),
// so what GatewayOf returns is trusted only as far as the Service's own
// namespace: an owner reference names an object of that namespace, and
// labels naming a Gateway elsewhere are read only to refuse the Service
// (ForeignTo) and never to look anything up there (ReferenceIn). A mark
// of a class-wide Service wins over every label naming one Gateway: in
// Envoy Gateway's merged mode, the implementation writes only the class
// label, and the rest may be a tenant's.
func GatewayOf(svc *corev1.Service) (gw Gateway, ok bool) {
	if class := svc.Labels[LabelOwningGatewayClass]; class != "" {
		return Gateway{Class: class}, true
	}
	var owners []metav1.OwnerReference
	for _, o := range svc.OwnerReferences {
		if gatewayGroup(o.APIVersion) && o.Kind == "Gateway" {
			owners = append(owners, o)
		}
	}
	switch {
	case len(owners) > 1:
		return Gateway{Namespace: svc.Namespace, Several: true}, true
	case len(owners) == 1:
		return Gateway{Namespace: svc.Namespace, Name: owners[0].Name, UID: owners[0].UID}, true
	}
	if name := svc.Labels[LabelOwningGatewayName]; name != "" {
		ns := svc.Labels[LabelOwningGatewayNamespace]
		if ns == "" {
			ns = svc.Namespace
		}
		return Gateway{Namespace: ns, Name: name}, true
	}
	if name := svc.Labels[LabelGatewayName]; name != "" {
		return Gateway{Namespace: svc.Namespace, Name: name}, true
	}
	for _, o := range svc.OwnerReferences {
		if gatewayGroup(o.APIVersion) && o.Kind == "GatewayClass" {
			return Gateway{Class: o.Name}, true
		}
	}
	return Gateway{}, false
}

func gatewayGroup(apiVersion string) bool {
	group, _, _ := strings.Cut(apiVersion, "/")
	return group == GatewayGroup
}

// ForeignTo says why a Service in namespace must not attach a claim for
// this Gateway ("" when it may): a claim serves its own namespace, and a
// Service the implementation runs in its own namespace for a Gateway of
// another, for several Gateways or for a whole class is not that
// Gateway's.
func (gw Gateway) ForeignTo(namespace string) string {
	switch {
	case gw.Class != "":
		return "serves every Gateway of GatewayClass " + gw.Class
	case gw.Several:
		return "serves several Gateways"
	case gw.Name != "" && gw.Namespace != namespace:
		return "serves Gateway " + gw.Namespace + "/" + gw.Name
	}
	return ""
}

// ReferenceIn is the Gateway as an Event's involved object, for a Service
// in namespace; ok is false when there is no one Gateway to name in that
// namespace: an Event about a Service goes to no Gateway elsewhere.
func (gw Gateway) ReferenceIn(namespace string) (ref *corev1.ObjectReference, ok bool) {
	if gw.Namespace != namespace {
		return nil, false
	}
	return gw.Reference()
}

// Reference is the Gateway as an Event's involved object, in whichever
// namespace it is; ok is false when there is no one Gateway to name (a
// class's Service, or several Gateways'). Only a Service where no tenant
// writes (an implementation's own namespace) may name a Gateway of
// another namespace by its labels.
func (gw Gateway) Reference() (ref *corev1.ObjectReference, ok bool) {
	if gw.Name == "" || gw.Several {
		return nil, false
	}
	return &corev1.ObjectReference{APIVersion: GatewayGroup + "/v1", Kind: "Gateway", Namespace: gw.Namespace, Name: gw.Name, UID: gw.UID}, true
}
