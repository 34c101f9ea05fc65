// Command claim runs the metallb-iad claim controller.
package main

import (
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/metallb-iad/controllers/claim"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
)

func main() {
	os.Exit(bootstrap.Main("claim",
		[]bootstrap.Requirement{bootstrap.CoreAPI, bootstrap.MetalLBAPI},
		func(o *bootstrap.Options) map[client.Object]cache.ByObject {
			return claim.CacheOptions(o.PlaceholderNamespace)
		},
		func(mgr ctrl.Manager, o *bootstrap.Options) error {
			return (&claim.Reconciler{
				Client:               mgr.GetClient(),
				APIReader:            mgr.GetAPIReader(),
				Recorder:             mgr.GetEventRecorderFor(claim.EventSource), //nolint:staticcheck // core/v1 Events
				PlaceholderNamespace: o.PlaceholderNamespace,
			}).SetupWithManager(mgr)
		}))
}
