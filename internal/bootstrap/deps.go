package bootstrap

import (
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultMetalLBNamespace is the namespace MetalLB watches unless
// --metallb-namespace says otherwise.
const DefaultMetalLBNamespace = "metallb-system"

// Deps are what every controller's Reconciler is given, embedded in each:
// the clients, the Event recorder and the two namespaces of the flags.
// A binary fills them with Options.Deps; SetupWithManager fills what a
// test left unset with Default.
type Deps struct {
	client.Client
	// APIReader reads straight from the API server, where a stale cache
	// must not decide. Defaults to the manager's.
	APIReader client.Reader
	// Recorder records the controller's Events. Defaults to the manager's
	// recorder for the controller's Event source.
	Recorder record.EventRecorder
	// PlaceholderNamespace holds the driver's placeholder Services.
	PlaceholderNamespace string
	// MetalLBNamespace is the namespace MetalLB watches, where the class
	// controller renders the pools and advertisements. Defaults to
	// DefaultMetalLBNamespace.
	MetalLBNamespace string
}

// Deps are the dependencies of a controller run on mgr with these options.
func (o *Options) Deps(mgr ctrl.Manager) Deps {
	return Deps{Client: mgr.GetClient(), PlaceholderNamespace: o.PlaceholderNamespace, MetalLBNamespace: o.MetalLBNamespace}
}

// Default fills what is unset from mgr: the client, the API reader, a
// recorder for eventSource, and the MetalLB namespace.
func (d *Deps) Default(mgr ctrl.Manager, eventSource string) {
	if d.Client == nil {
		d.Client = mgr.GetClient()
	}
	if d.APIReader == nil {
		d.APIReader = mgr.GetAPIReader()
	}
	if d.Recorder == nil {
		d.Recorder = mgr.GetEventRecorderFor(eventSource) //nolint:staticcheck // core/v1 Events, as the project uses
	}
	if d.MetalLBNamespace == "" {
		d.MetalLBNamespace = DefaultMetalLBNamespace
	}
}

// Reconciler is what a controller package sets up on a manager: its
// reconcilers, watches and indexes.
type Reconciler interface {
	SetupWithManager(mgr ctrl.Manager) error
}

// NewController is the Controller of one of the driver's four controllers:
// named name, it needs DriverAPIs, builds its manager's cache with
// cacheOptions and sets up the Reconciler newReconciler makes of the
// dependencies the options give (Options.Deps).
func NewController(name string, cacheOptions func(*Options) map[client.Object]cache.ByObject, newReconciler func(Deps) Reconciler) Controller {
	return Controller{
		Name: name, Requires: DriverAPIs, Cache: cacheOptions,
		Setup: func(mgr ctrl.Manager, o *Options) error {
			return newReconciler(o.Deps(mgr)).SetupWithManager(mgr)
		},
	}
}
