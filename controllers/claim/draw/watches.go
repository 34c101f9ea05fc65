package draw

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// eventPlaceholder is the cached placeholder an Event of MetalLB's is
// about; nil for another object or a placeholder that is gone.
func EventPlaceholder(ctx context.Context, c client.Reader, placeholderNS string, o client.Object) *corev1.Service {
	ev := o.(*corev1.Event)
	if ev.InvolvedObject.Kind != "Service" || ev.InvolvedObject.Namespace != placeholderNS {
		return nil
	}
	ph := &corev1.Service{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ev.InvolvedObject.Namespace, Name: ev.InvolvedObject.Name}, ph); err != nil {
		return nil
	}
	return ph
}
