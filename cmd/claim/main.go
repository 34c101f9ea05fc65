// Command claim runs the metallb-iad claim controller.
package main

import (
	"os"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cozystack/metallb-iad/controllers/claim"
	"github.com/cozystack/metallb-iad/internal/bootstrap"
)

func main() {
	os.Exit(bootstrap.Main("claim",
		[]bootstrap.Requirement{bootstrap.CoreAPI, bootstrap.MetalLBAPI},
		nil,
		func(mgr ctrl.Manager, o *bootstrap.Options) error {
			return (&claim.Reconciler{Client: mgr.GetClient(), PlaceholderNamespace: o.PlaceholderNamespace}).SetupWithManager(mgr)
		}))
}
