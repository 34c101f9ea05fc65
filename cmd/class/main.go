// Command class runs the metallb-iad class controller.
package main

import (
	"os"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cozystack/metallb-iad/controllers/class"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
)

func main() {
	os.Exit(bootstrap.Main("class",
		[]bootstrap.Requirement{bootstrap.CoreAPI, bootstrap.MetalLBAPI},
		nil,
		func(mgr ctrl.Manager, o *bootstrap.Options) error {
			return (&class.Reconciler{Client: mgr.GetClient(), MetalLBNamespace: o.MetalLBNamespace}).SetupWithManager(mgr)
		}))
}
