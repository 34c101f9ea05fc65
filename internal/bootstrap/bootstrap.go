// Package bootstrap is the start-up code the four controller binaries share.
package bootstrap

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/compact"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/internal/parking"
	"github.com/cozystack/metallb-iad/internal/recorder"
	"github.com/cozystack/metallb-iad/internal/sharingkey"
)

// Scheme holds client-go's kinds, the address model and MetalLB's v1beta1.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(iadv1alpha1.AddToScheme(s))
	utilruntime.Must(metallbv1beta1.AddToScheme(s))
	return s
}

// Options are the flags every controller binary accepts.
type Options struct {
	// Controller is the binary's controller name (class, claim, service, ipaddress).
	Controller string

	Kubeconfig         string
	LeaderElect        bool
	LeaderElectionNS   string
	MetricsBindAddress string
	// MetricsSecure serves metrics over HTTPS to callers the API server
	// authenticates and authorizes (metricsFilter).
	MetricsSecure          bool
	HealthProbeBindAddress string
	// PprofBindAddress serves /debug/pprof; empty (the default) disables it.
	PprofBindAddress     string
	PlaceholderNamespace string
	MetalLBNamespace     string
	// ParkingPool is Deps.ParkingPool.
	ParkingPool string
	// LoadBalancerClass is Deps.LoadBalancerClass.
	LoadBalancerClass string
	// GatewayNamespaces are where Gateway API implementations run the
	// Services of Gateways of other namespaces (recorder.EchoToGateways).
	GatewayNamespaces []string
	// SharingKeySecret names the Secret holding the secret of the sharing
	// keys (loadSharingSecret).
	SharingKeySecret string
	// SharingKeyCreate creates SharingKeySecret when it is missing.
	SharingKeyCreate bool
	// SharingKeyFile holds the secret instead, for a binary run by hand.
	SharingKeyFile string

	KubeAPIQPS   float64
	KubeAPIBurst int

	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration

	Zap zap.Options

	// sharing is the secret of the sharing keys read at start
	// (sharingkey.Load), which the sharing-key watch follows.
	sharing sharingkey.Loaded

	// WarmStandby makes a replica that does not hold the lease start its
	// watches all the same (controller-runtime's warmup).
	WarmStandby bool

	// SkipNameValidation lets tests run same-named controllers in one process.
	SkipNameValidation bool

	kubeconfigFlag *flag.Flag
}

// bindFlags registers the shared flags on fs.
func (o *Options) bindFlags(fs *flag.FlagSet) {
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = "metallb-iad-system"
	}
	// controller-runtime registers --kubeconfig itself; a second one panics.
	if f := fs.Lookup("kubeconfig"); f != nil {
		o.kubeconfigFlag = f
	} else {
		fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "Path to a kubeconfig; empty means in-cluster configuration (or $KUBECONFIG).")
	}
	fs.BoolVar(&o.LeaderElect, "leader-elect", true, "Take the controller's leader-election lease before reconciling, so only one replica works at a time.")
	fs.StringVar(&o.LeaderElectionNS, "leader-election-namespace", ns, "Namespace of the leader-election lease (default: $POD_NAMESPACE).")
	// At client-go's 50/s the client limiter, not MetalLB, paced a burst of
	// claims (BENCHMARKS.md); API priority and fairness protects the server.
	fs.Float64Var(&o.KubeAPIQPS, "kube-api-qps", 200, "Sustained requests per second the controller may send to the API server.")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", 400, "Requests the controller may send to the API server in a burst.")
	fs.BoolVar(&o.WarmStandby, "warm-standby", false, "A replica that does not hold the lease watches all the same, so it takes over with its cache synced and its queue filled; each standby then spends the CPU and memory of watching.")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "How long a standby waits before taking over an unrenewed lease.")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second, "How long the leader keeps trying to renew before it gives up leadership.")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", 2*time.Second, "How often replicas try to take or renew the lease.")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", ":8080", "Address the Prometheus metrics endpoint binds to; \"0\" disables it.")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", true, "Serve metrics over HTTPS (a self-signed certificate) only to callers whose bearer token the API server authenticates (TokenReview) and authorizes for GET /metrics (SubjectAccessReview); false serves plain HTTP to anyone who reaches the port.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz endpoints bind to.")
	fs.StringVar(&o.PprofBindAddress, "pprof-bind-address", "", "Address Go's /debug/pprof profiles are served on, for profiling the controller; empty disables it.")
	fs.StringVar(&o.PlaceholderNamespace, "placeholder-namespace", ns, "Namespace of the driver's placeholder Services (tenants must not write there).")
	fs.StringVar(&o.MetalLBNamespace, "metallb-namespace", DefaultMetalLBNamespace, "Namespace MetalLB watches for IPAddressPools and advertisements.")
	fs.StringVar(&o.ParkingPool, "parking-pool", parking.DefaultPool, "IPAddressPool, in the MetalLB namespace, that a hold placeholder moves to while its address is attached, so that attaching costs MetalLB no pass over every Service; the service and ipaddress controllers must agree. Absent or empty: the hold is deleted or shared instead.")
	fs.StringVar(&o.LoadBalancerClass, "metallb-load-balancer-class", "", "The spec.loadBalancerClass MetalLB serves (its --lb-class); empty: MetalLB serves the Services without one. The service controller attaches no claim to a Service of another class, and says why.")
	fs.Func("gateway-implementation-namespaces", "Comma-separated namespaces where Gateway API implementations run the Services of Gateways of other namespaces (Envoy Gateway's default mode) and no tenant writes Services: the driver's Events about a Service there also go to the Gateway its labels name, so the Gateway's tenant learns why it gets no claim.", func(v string) error {
		o.GatewayNamespaces = nil
		for _, ns := range strings.Split(v, ",") {
			if ns = strings.TrimSpace(ns); ns != "" {
				o.GatewayNamespaces = append(o.GatewayNamespaces, ns)
			}
		}
		return nil
	})
	fs.StringVar(&o.SharingKeySecret, "sharing-key-secret", "", "Secret (NAME in the leader-election namespace, or NAMESPACE/NAME) whose field \"key\" holds the secret (at least 16 bytes) MetalLB sharing keys are derived from; the claim, ipaddress and service controllers must share it and tenants must not read it.")
	fs.BoolVar(&o.SharingKeyCreate, "sharing-key-create", false, "Create the --sharing-key-secret Secret with a random key when it does not exist (the first controller to start creates it, the others read it).")
	fs.StringVar(&o.SharingKeyFile, "sharing-key-file", "", "File holding the secret (at least 16 bytes) MetalLB sharing keys are derived from; the claim, ipaddress and service controllers must share it and tenants must not read it. Empty: keys are derived from names alone, which a tenant can compute.")
	o.Zap.BindFlags(fs)
}

// parseFlags binds and parses the shared flags from the command line.
func parseFlags(controller string) *Options {
	o := &Options{Controller: controller}
	o.bindFlags(flag.CommandLine)
	flag.Parse()
	return o
}

// RESTConfig loads the client configuration (--kubeconfig, $KUBECONFIG, in-cluster).
func (o *Options) RESTConfig() (*rest.Config, error) {
	if o.kubeconfigFlag != nil && o.Kubeconfig == "" {
		o.Kubeconfig = o.kubeconfigFlag.Value.String()
	}
	var cfg *rest.Config
	var err error
	if o.Kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	} else {
		cfg, err = ctrl.GetConfig()
	}
	if err != nil {
		return nil, err
	}
	if o.KubeAPIQPS > 0 {
		cfg.QPS = float32(o.KubeAPIQPS)
	}
	if o.KubeAPIBurst > 0 {
		cfg.Burst = o.KubeAPIBurst
	}
	// A gzipped watch stream keeps its reader in memory (1.5 MB of the claim
	// controller's heap at 1,000 claims, BENCHMARKS.md): not worth it in-cluster.
	cfg.DisableCompression = true
	return cfg, nil
}

// Requirement is an API a controller cannot work without.
type Requirement struct {
	GroupVersion schema.GroupVersion
	Resources    []string
	// Hint tells the user how to provide it.
	Hint string
}

// CoreAPI is the address model (the core's CRDs).
var CoreAPI = Requirement{
	GroupVersion: iadv1alpha1.GroupVersion,
	Resources:    []string{"ipaddressclasses", "ipaddressclaims", "ipaddresses"},
	Hint:         "install the address-controller chart, or this chart with installCRDs=true",
}

// MetalLBAPI is MetalLB's configuration API.
var MetalLBAPI = Requirement{
	GroupVersion: metallbv1beta1.GroupVersion,
	Resources:    []string{"ipaddresspools", "l2advertisements", "bgpadvertisements"},
	Hint:         "install MetalLB (its CRDs) first",
}

// DriverAPIs are what every controller of the driver needs served.
var DriverAPIs = []Requirement{CoreAPI, MetalLBAPI}

// ErrUnreachable wraps a failure to talk to the API server at all.
var ErrUnreachable = errors.New("cannot reach the API server")

// Preflight checks that the API server answers and serves every required
// resource; its errors are worded for the user.
func Preflight(cfg *rest.Config, reqs ...Requirement) error {
	c := rest.CopyConfig(cfg)
	c.Timeout = 10 * time.Second
	dc, err := discovery.NewDiscoveryClientForConfig(c)
	if err != nil {
		return fmt.Errorf("%w at %s: %v", ErrUnreachable, cfg.Host, err)
	}
	if _, err := dc.ServerVersion(); err != nil {
		return fmt.Errorf("%w at %s: %v", ErrUnreachable, cfg.Host, err)
	}
	for _, r := range reqs {
		list, err := dc.ServerResourcesForGroupVersion(r.GroupVersion.String())
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("the API server does not serve %s: its CRDs are missing (%s)", r.GroupVersion, r.Hint)
		}
		if err != nil {
			return fmt.Errorf("%w at %s: discovery of %s: %v", ErrUnreachable, cfg.Host, r.GroupVersion, err)
		}
		served := map[string]bool{}
		for _, res := range list.APIResources {
			served[res.Name] = true
		}
		for _, name := range r.Resources {
			if !served[name] {
				return fmt.Errorf("the API server does not serve %s.%s: its CRD is missing (%s)", name, r.GroupVersion.Group, r.Hint)
			}
		}
	}
	return nil
}

// NewManager builds a manager for one controller: own lease, probes,
// metrics, a cache of compacted objects (compact.Object), narrowed per
// kind by byObject.
func NewManager(cfg *rest.Config, o *Options, byObject map[client.Object]cache.ByObject) (ctrl.Manager, error) {
	cacheOpts := cache.Options{
		DefaultTransform: compact.Object,
	}
	if len(byObject) > 0 {
		cacheOpts.ByObject = map[client.Object]cache.ByObject{}
		for k, v := range byObject {
			cacheOpts.ByObject[k] = v
		}
	}
	var controllers config.Controller
	if o.SkipNameValidation {
		controllers.SkipNameValidation = &o.SkipNameValidation
	}
	if o.WarmStandby {
		controllers.EnableWarmup = &o.WarmStandby
	}
	events := recorder.NewBroadcaster()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Controller:                    controllers,
		EventBroadcaster:              events, //nolint:staticcheck // core/v1 Events, as the project uses
		Scheme:                        Scheme(),
		Cache:                         cacheOpts,
		MapperProvider:                newRememberingMapper,
		Metrics:                       metricsserver.Options{BindAddress: o.MetricsBindAddress, SecureServing: o.MetricsSecure, FilterProvider: metricsFilter(o.MetricsSecure)},
		HealthProbeBindAddress:        o.HealthProbeBindAddress,
		PprofBindAddress:              o.PprofBindAddress,
		LeaderElection:                o.LeaderElect,
		LeaderElectionID:              names.LeaseID(o.Controller),
		LeaderElectionNamespace:       o.LeaderElectionNS,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 durationOrNil(o.LeaseDuration),
		RenewDeadline:                 durationOrNil(o.RenewDeadline),
		RetryPeriod:                   durationOrNil(o.RetryPeriod),
	})
	if err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("readyz", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return errors.New("informer caches not synced")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return mgr, nil
}

// Controller is one of the driver's controllers. cmd/<name> hands it to
// Main and the tests to NewManager, so tests run it as the binary does.
type Controller struct {
	Name     string
	Requires []Requirement
	// Cache returns the per-object cache options (nil: the defaults).
	Cache func(*Options) map[client.Object]cache.ByObject
	// Setup registers the controller's indexes and reconcilers on mgr.
	Setup func(mgr ctrl.Manager, o *Options) error
}

// NewManager creates the controller's manager and sets the controller up.
func (c Controller) NewManager(cfg *rest.Config, o *Options) (ctrl.Manager, error) {
	o.Controller = c.Name
	byObject := map[client.Object]cache.ByObject{}
	if c.Cache != nil {
		for k, v := range c.Cache(o) {
			byObject[k] = v
		}
	}
	if opts, ok := o.sharing.CacheOptions(); ok {
		byObject[&corev1.Secret{}] = opts // the one Secret the watch follows, and no other
	}
	mgr, err := NewManager(cfg, o, byObject)
	if err != nil {
		return nil, fmt.Errorf("cannot create the manager: %w", err)
	}
	if w := o.sharing.Watch(o.SharingKeyCreate, mgr.GetCache(), mgr.GetClient(), ctrl.Log.WithName(c.Name).WithName("sharing-key")); w != nil {
		if err := mgr.Add(w); err != nil {
			return nil, err
		}
		if err := mgr.AddReadyzCheck("sharing-key", w.Ready); err != nil {
			return nil, err
		}
	}
	if err := c.Setup(mgr, o); err != nil {
		return nil, fmt.Errorf("cannot set up the controller: %w", err)
	}
	return mgr, nil
}

// Main runs the controller as its binary and returns the exit code.
func Main(c Controller) int {
	controller := c.Name
	o := parseFlags(controller)
	ctrl.SetLogger(deferValues(zap.New(zap.UseFlagOptions(&o.Zap))))
	log := ctrl.Log.WithName(controller)
	ctx := ctrl.SetupSignalHandler()

	cfg, err := o.RESTConfig()
	if err != nil {
		fmt.Fprintf(os.Stderr, "metallb-iad-%s: cannot load the client configuration: %v\n", controller, err)
		return 1
	}
	if err := Preflight(cfg, c.Requires...); err != nil {
		fmt.Fprintf(os.Stderr, "metallb-iad-%s: %v\n", controller, err)
		return 1
	}
	if o.sharing, err = sharingkey.Load(ctx, cfg, o.SharingKeySecret, o.SharingKeyFile, o.LeaderElectionNS, o.SharingKeyCreate); err != nil {
		fmt.Fprintf(os.Stderr, "metallb-iad-%s: %v\n", controller, err)
		return 1
	}
	if !o.sharing.Keys.Now().Secret() {
		log.Info("no --sharing-key-secret or --sharing-key-file: MetalLB sharing keys are derived from names alone, which a tenant can compute")
	}
	mgr, err := c.NewManager(cfg, o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "metallb-iad-%s: %v\n", controller, err)
		return 1
	}
	memoryLimit := followMemoryLimit()
	log.Info("starting", "lease", names.LeaseID(controller), "leaderElect", o.LeaderElect,
		"placeholderNamespace", o.PlaceholderNamespace, "metallbNamespace", o.MetalLBNamespace, "parkingPool", o.ParkingPool,
		"goMemoryLimit", memoryLimit)
	if err := mgr.Start(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "metallb-iad-%s: %v\n", controller, err)
		return 1
	}
	return 0
}

func durationOrNil(d time.Duration) *time.Duration {
	if d <= 0 {
		return nil
	}
	return &d
}
