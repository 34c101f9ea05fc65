// Command service runs the metallb-iad service controller.
package main

import (
	"os"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cozystack/metallb-iad/controllers/service"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
)

func main() {
	os.Exit(bootstrap.Main("service",
		[]bootstrap.Requirement{bootstrap.CoreAPI, bootstrap.MetalLBAPI},
		nil,
		func(mgr ctrl.Manager, o *bootstrap.Options) error {
			return (&service.Reconciler{Client: mgr.GetClient(), PlaceholderNamespace: o.PlaceholderNamespace}).SetupWithManager(mgr)
		}))
}
