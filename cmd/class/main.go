// Command class runs the metallb-iad class controller.
package main

import (
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/metallb-iad/controllers/class"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
)

func main() {
	os.Exit(bootstrap.Main("class",
		[]bootstrap.Requirement{bootstrap.CoreAPI, bootstrap.MetalLBAPI},
		func(o *bootstrap.Options) map[client.Object]cache.ByObject {
			return class.CacheByObject(o.MetalLBNamespace)
		},
		func(mgr ctrl.Manager, o *bootstrap.Options) error {
			return (&class.Reconciler{
				Client:           mgr.GetClient(),
				MetalLBNamespace: o.MetalLBNamespace,
				Recorder:         mgr.GetEventRecorderFor(class.EventSource),
			}).SetupWithManager(mgr)
		}))
}
