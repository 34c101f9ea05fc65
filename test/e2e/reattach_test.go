package e2e

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
)

// TestReattachAtOnce: the Service a claim is attached to is deleted and the
// next one is created at once, as `kubectl delete` then `kubectl apply` do,
// before the hold is back on the address, four times over; then the
// annotation is taken off one Service and a new one names the claim at
// once, twice. Each Service gets the same IP and nothing says a Warning: a
// detach and a re-attach that cross neither pin the new Service on a
// release said for the old one nor leave it refused for a hold that has
// moved away since.
func TestReattachAtOnce(t *testing.T) {
	story(t, "reattach", "delete the attached Service and create the next at once", "reattach", func(ctx context.Context, t *testing.T, cfg *envconf.Config, k *kit) {
		k.class("e2e-reattach", iadv1alpha1.ReclaimRetain, "198.51.100.128/28")
		a := k.heldClaim("ip", "e2e-reattach")
		k.service("s0", "ip")
		k.attached("s0", a)
		for i := 1; i <= 4; i++ {
			prev := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: k.ns, Name: fmt.Sprintf("s%d", i-1)}}
			require.NoError(t, k.k.Delete(ctx, prev))
			next := fmt.Sprintf("s%d", i)
			k.service(next, "ip")
			k.attached(next, a)
		}
		// The same by the annotation: taken off one Service, put on the next.
		for i := 5; i <= 6; i++ {
			k.unannotate(fmt.Sprintf("s%d", i-1))
			next := fmt.Sprintf("s%d", i)
			k.service(next, "ip")
			k.attached(next, a)
		}
		k.noWarnings(nil, "IPAddress/"+a.Name, "IPAddressClass/e2e-reattach")
	})
}
