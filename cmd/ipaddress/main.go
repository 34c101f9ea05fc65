// Command ipaddress runs the metallb-iad ipaddress controller.
package main

import (
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/metallb-iad/controllers/ipaddress"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
)

func main() {
	os.Exit(bootstrap.Main(ipaddress.ControllerName,
		[]bootstrap.Requirement{bootstrap.CoreAPI, bootstrap.MetalLBAPI},
		func(o *bootstrap.Options) map[client.Object]cache.ByObject {
			opts := ipaddress.CacheOptions(o.PlaceholderNamespace)
			for k, v := range ipaddress.PoolCacheOptions(o.MetalLBNamespace) {
				opts[k] = v
			}
			return opts
		},
		func(mgr ctrl.Manager, o *bootstrap.Options) error {
			return (&ipaddress.Reconciler{
				Client:               mgr.GetClient(),
				APIReader:            mgr.GetAPIReader(),
				Recorder:             mgr.GetEventRecorderFor(ipaddress.EventSource), //nolint:staticcheck // core/v1 Events, as the project uses
				PlaceholderNamespace: o.PlaceholderNamespace,
				MetalLBNamespace:     o.MetalLBNamespace,
			}).SetupWithManager(mgr)
		}))
}
