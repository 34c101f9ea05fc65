package bootstrap

import (
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/metallb-iad/internal/recorder"
	"github.com/cozystack/metallb-iad/internal/sharingkey"
)

// DefaultMetalLBNamespace is the default of --metallb-namespace.
const DefaultMetalLBNamespace = "metallb-system"

// Deps are what every controller's Reconciler embeds. Binaries fill them
// in NewController; Default fills what a test left unset.
type Deps struct {
	client.Client
	// APIReader reads from the API server, where a stale cache must not decide.
	APIReader client.Reader
	// Recorder records the controller's Events.
	Recorder record.EventRecorder
	// PlaceholderNamespace holds the driver's placeholder Services.
	PlaceholderNamespace string
	// MetalLBNamespace is where MetalLB reads pools and advertisements.
	MetalLBNamespace string
	// ParkingPool names the IPAddressPool a hold steps aside to while its
	// address is attached (internal/parking); empty turns parking off.
	ParkingPool string
	// LoadBalancerClass is the spec.loadBalancerClass MetalLB serves; ""
	// for the Services without one.
	LoadBalancerClass string
	// Keys hold the Keys that derive the sharing keys, under the secret
	// read at start and kept current by the sharing-key watch
	// (internal/sharingkey); nil: no secret.
	Keys *sharingkey.Keyring
}

// Deps are the dependencies of a controller run on mgr with these options.
func (o *Options) Deps(mgr ctrl.Manager) Deps {
	return Deps{Client: mgr.GetClient(), PlaceholderNamespace: o.PlaceholderNamespace, MetalLBNamespace: o.MetalLBNamespace, ParkingPool: o.ParkingPool, LoadBalancerClass: o.LoadBalancerClass, Keys: o.sharing.Keys}
}

// Default fills what is unset from mgr, with a recorder for eventSource.
func (d *Deps) Default(mgr ctrl.Manager, eventSource string) {
	if d.Client == nil {
		d.Client = mgr.GetClient()
	}
	if d.APIReader == nil {
		d.APIReader = mgr.GetAPIReader()
	}
	if d.Recorder == nil {
		// A test's own Deps: the binaries' recorder is NewController's.
		d.Recorder = mgr.GetEventRecorderFor(eventSource) //nolint:staticcheck // core/v1 Events, as the project uses
	}
	if d.MetalLBNamespace == "" {
		d.MetalLBNamespace = DefaultMetalLBNamespace
	}
}

// Reconciler is what a controller package sets up on a manager.
type Reconciler interface {
	SetupWithManager(mgr ctrl.Manager) error
}

// NewController is the Controller named name: it requires DriverAPIs,
// caches with cacheOptions and sets up newReconciler with o.Deps(mgr) and
// the recorder of Events "metallb-iad-<name>", echoed to Gateways.
func NewController(name string, cacheOptions func(*Options) map[client.Object]cache.ByObject, newReconciler func(Deps) Reconciler) Controller {
	return Controller{
		Name: name, Requires: DriverAPIs, Cache: cacheOptions,
		Setup: func(mgr ctrl.Manager, o *Options) error {
			d := o.Deps(mgr)
			// Every Event a controller records about a Service is recorded
			// a second time on the Gateway the Service serves, where the
			// tenant who wrote the Gateway looks (recorder.EchoToGateways).
			d.Recorder = recorder.EchoToGateways(mgr.GetEventRecorderFor("metallb-iad-"+name), o.GatewayNamespaces...) //nolint:staticcheck // core/v1 Events, as the project uses
			return newReconciler(d).SetupWithManager(mgr)
		},
	}
}
