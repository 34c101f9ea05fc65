package marks

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestGatewayOf(t *testing.T) {
	owner := func(apiVersion, kind, name string) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID("u-" + name)}
	}
	svc := func(labels map[string]string, owners ...metav1.OwnerReference) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", Labels: labels, OwnerReferences: owners}}
	}
	tests := []struct {
		name    string
		svc     *corev1.Service
		ok      bool
		want    Gateway
		foreign string
		ref     bool
	}{
		{"a plain Service", svc(nil), false, Gateway{}, "", false},
		{"owned by a Deployment", svc(nil, owner("apps/v1", "Deployment", "web")), false, Gateway{}, "", false},
		{"owned by its Gateway (Gateway Namespace mode)", svc(nil, owner("gateway.networking.k8s.io/v1", "Gateway", "web")),
			true, Gateway{Namespace: "team-a", Name: "web", UID: "u-web"}, "", true},
		{"a Gateway kind of another group is not one", svc(nil, owner("example.com/v1", "Gateway", "web")), false, Gateway{}, "", false},
		{"labelled for a Gateway of its namespace", svc(map[string]string{LabelOwningGatewayName: "web", LabelOwningGatewayNamespace: "team-a"}),
			true, Gateway{Namespace: "team-a", Name: "web"}, "", true},
		{"labelled for a Gateway of another namespace (the implementation's own)",
			svc(map[string]string{LabelOwningGatewayName: "web", LabelOwningGatewayNamespace: "team-b"}, owner("gateway.networking.k8s.io/v1", "GatewayClass", "eg")),
			true, Gateway{Namespace: "team-b", Name: "web"}, "serves Gateway team-b/web", false},
		{"merged Gateways of a class", svc(map[string]string{LabelOwningGatewayClass: "eg"}), true, Gateway{Class: "eg"}, "serves every Gateway of GatewayClass eg", false},
		{"merged Gateways with a tenant's labels naming one Gateway of the Service's namespace: the class label wins",
			svc(map[string]string{LabelOwningGatewayClass: "eg", LabelOwningGatewayName: "admin-gw", LabelOwningGatewayNamespace: "team-a"}),
			true, Gateway{Class: "eg"}, "serves every Gateway of GatewayClass eg", false},
		{"a tenant's labels naming a Gateway of another namespace: refused, and no Event goes there",
			svc(map[string]string{LabelOwningGatewayName: "prod-gw", LabelOwningGatewayNamespace: "kube-system"}),
			true, Gateway{Namespace: "kube-system", Name: "prod-gw"}, "serves Gateway kube-system/prod-gw", false},
		{"owned by two Gateways", svc(nil, owner("gateway.networking.k8s.io/v1", "Gateway", "a"), owner("gateway.networking.k8s.io/v1", "Gateway", "b")),
			true, Gateway{Namespace: "team-a", Several: true}, "serves several Gateways", false},
		{"an owner reference wins over labels naming another namespace",
			svc(map[string]string{LabelOwningGatewayName: "x", LabelOwningGatewayNamespace: "kube-system"}, owner("gateway.networking.k8s.io/v1", "Gateway", "web")),
			true, Gateway{Namespace: "team-a", Name: "web", UID: "u-web"}, "", true},
		{"labelled with Gateway API's gateway-name (Contour): a Gateway of its own namespace",
			svc(map[string]string{LabelGatewayName: "web", "projectcontour.io/owning-gateway-name": "web"}),
			true, Gateway{Namespace: "team-a", Name: "web"}, "", true},
		{"Envoy Gateway's labels win over gateway-name",
			svc(map[string]string{LabelGatewayName: "web", LabelOwningGatewayName: "web", LabelOwningGatewayNamespace: "team-b"}),
			true, Gateway{Namespace: "team-b", Name: "web"}, "serves Gateway team-b/web", false},
		{"owned by a GatewayClass alone", svc(nil, owner("gateway.networking.k8s.io/v1", "GatewayClass", "eg")), true, Gateway{Class: "eg"}, "serves every Gateway of GatewayClass eg", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gw, ok := GatewayOf(tt.svc)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, gw)
			assert.Equal(t, tt.foreign, gw.ForeignTo(tt.svc.Namespace))
			ref, ok := gw.ReferenceIn(tt.svc.Namespace)
			assert.Equal(t, tt.ref, ok)
			if ok {
				assert.Equal(t, corev1.ObjectReference{APIVersion: "gateway.networking.k8s.io/v1", Kind: "Gateway", Namespace: tt.want.Namespace, Name: tt.want.Name, UID: tt.want.UID}, *ref)
			}
		})
	}
}
