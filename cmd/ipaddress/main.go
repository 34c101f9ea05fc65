// Command ipaddress runs the metallb-iad ipaddress controller.
package main

import (
	"os"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cozystack/metallb-iad/controllers/ipaddress"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
)

func main() {
	os.Exit(bootstrap.Main("ipaddress",
		[]bootstrap.Requirement{bootstrap.CoreAPI, bootstrap.MetalLBAPI},
		nil,
		func(mgr ctrl.Manager, o *bootstrap.Options) error {
			return (&ipaddress.Reconciler{Client: mgr.GetClient(), PlaceholderNamespace: o.PlaceholderNamespace}).SetupWithManager(mgr)
		}))
}
