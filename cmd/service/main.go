// Command service runs the metallb-iad service controller.
package main

import (
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/metallb-iad/controllers/service"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
)

func main() {
	os.Exit(bootstrap.Main("service",
		[]bootstrap.Requirement{bootstrap.CoreAPI, bootstrap.MetalLBAPI},
		func(o *bootstrap.Options) map[client.Object]cache.ByObject {
			return service.CacheOptions(o.MetalLBNamespace)
		},
		func(mgr ctrl.Manager, o *bootstrap.Options) error {
			return (&service.Reconciler{
				Client:               mgr.GetClient(),
				APIReader:            mgr.GetAPIReader(),
				Recorder:             mgr.GetEventRecorderFor(service.RecorderName), //nolint:staticcheck // core/v1 Events
				PlaceholderNamespace: o.PlaceholderNamespace,
				MetalLBNamespace:     o.MetalLBNamespace,
			}).SetupWithManager(mgr)
		}))
}
