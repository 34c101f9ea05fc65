// Package node runs a one-node Kubernetes cluster on this machine for the
// node e2e provider: the project's local control plane (test/cluster) with
// kube-apiserver serving pods, plus containerd and runc and the CNI plugins
// from Debian's packages, and kubelet, kube-proxy and kube-scheduler built
// from the Go module proxy (hack/build-node-tools.sh). Images are built
// without a container engine and imported into containerd.
//
// The node is machine-wide (root, one at a time, a lock). Guard rules keep
// every packet on the machine before the first pod starts; Stop takes the
// machine back to how Start found it and checks it, and Start first cleans
// up after a run that died.
package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/cozystack/metallb-iad/test/cluster"
	"github.com/cozystack/metallb-iad/test/manifests"
)

// Images the node imports. Their tags are local: nothing is ever pulled.
const (
	DriverImageRepo = "ghcr.io/cozystack/metallb-iad"
	DriverImageTag  = "node"
	MetalLBImage    = "quay.io/metallb/controller"
	pauseImage      = "localhost/metallb-iad-pause:node"
)

// packages are the Debian packages the node needs, with a file each
// provides.
var packages = map[string]string{
	"containerd":                  "/usr/bin/containerd",
	"runc":                        "/usr/sbin/runc",
	"containernetworking-plugins": "/usr/lib/cni/bridge",
	"iptables":                    "/usr/sbin/iptables",
	"conntrack":                   "/usr/sbin/conntrack",
	"socat":                       "/usr/bin/socat",
}

// Node is a running one-node cluster.
type Node struct {
	Cluster *cluster.Cluster
	// MetalLBVersion is the MetalLB controller's version (its image tag).
	MetalLBVersion string
	// KubeVersion is the Kubernetes version the node binaries were built
	// from (the API server reports none).
	KubeVersion string

	log      io.Writer
	lockf    *os.File
	host     Host
	before   Snapshot
	binDir   string
	sock     string
	procs    map[string]*cluster.Process
	stopped  bool
	startErr error
}

// BinDir is where hack/build-node-tools.sh links the node binaries.
func BinDir() string { return filepath.Join(manifests.Root(), "bin", "node") }

// Check tells whether the node can run here: root, the Debian packages
// (installed when missing). Its error wraps ErrSkip.
func Check() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: it needs root (kubelet, containerd, iptables, cgroups)", ErrSkip)
	}
	var missing []string
	for pkg, file := range packages {
		if _, err := os.Stat(file); err != nil {
			missing = append(missing, pkg)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	install := func() error {
		cmd := exec.Command("apt-get", append([]string{"install", "-y", "-q", "--no-install-recommends"}, missing...)...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	if err := install(); err != nil {
		if _, uerr := run("apt-get", "update", "-q"); uerr != nil {
			return fmt.Errorf("%w: apt-get update: %v", ErrSkip, uerr)
		}
		if err := install(); err != nil {
			return fmt.Errorf("%w: apt-get install %s: %v", ErrSkip, strings.Join(missing, " "), err)
		}
	}
	return nil
}

// Start brings the node up. On error it has already cleaned up.
func Start(ctx context.Context, log io.Writer) (n *Node, err error) {
	if err := Check(); err != nil {
		return nil, err
	}
	n = &Node{log: log, binDir: BinDir(), procs: map[string]*cluster.Process{}}
	if err := n.ensureBinaries(); err != nil {
		return nil, err
	}
	// The cache folders are named <binary>-<version>.
	kubelet, err := filepath.EvalSymlinks(filepath.Join(n.binDir, "kubelet"))
	if err != nil {
		return nil, err
	}
	n.KubeVersion = strings.TrimPrefix(filepath.Base(filepath.Dir(kubelet)), "kubelet-")
	if n.lockf, err = lock(10 * time.Minute); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			n.startErr = err
			_ = n.Stop(context.Background())
		}
	}()

	if recoverDeadRun(filepath.Join(n.binDir, "kube-proxy")) {
		n.logf("cleaned up after an earlier run that did not finish")
	}
	n.before = Take()
	n.host = recordHost()
	for _, d := range []string{"logs", "cluster", "certs", "images", "cni/net.d", "cni/ipam", "kubelet", "containerd"} {
		if err := os.MkdirAll(filepath.Join(Base, d), 0o700); err != nil {
			return nil, err
		}
	}
	if err := saveHost(n.host); err != nil {
		return nil, err
	}

	step := func(what string, f func() error) error {
		t := time.Now()
		if err := f(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		n.logf("%s (%s)", what, time.Since(t).Round(100*time.Millisecond))
		return nil
	}
	if err := step("node address and guard rules", func() error {
		if err := addNodeAddress(); err != nil {
			return err
		}
		return addGuard()
	}); err != nil {
		return nil, err
	}
	if err := step("control plane", func() error { return n.startControlPlane(ctx) }); err != nil {
		return nil, err
	}
	if err := step("containerd", n.startContainerd); err != nil {
		return nil, err
	}
	if err := step("images built and imported", n.importImages); err != nil {
		return nil, err
	}
	// The kubelet registers the Node before kube-proxy starts: kube-proxy
	// exits when the node's IPs change, and they change from none to the
	// node IP at registration. No pod can start before the scheduler runs,
	// so kube-proxy still translates a pod's first packet to the
	// `kubernetes` Service.
	if err := step("kubelet, node Ready", func() error { return n.startKubelet(ctx) }); err != nil {
		return nil, err
	}
	if err := step("kube-proxy", func() error { return n.startKubeProxy(ctx) }); err != nil {
		return nil, err
	}
	if err := step("kube-scheduler", n.startScheduler); err != nil {
		return nil, err
	}
	return n, nil
}

func (n *Node) logf(format string, args ...any) {
	if n.log != nil {
		fmt.Fprintf(n.log, "node: "+format+"\n", args...)
	}
}

func (n *Node) ensureBinaries() error {
	for _, b := range []string{"kubelet", "kube-proxy", "kube-scheduler"} {
		if _, err := os.Stat(filepath.Join(n.binDir, b)); err != nil {
			cmd := exec.Command("bash", filepath.Join(manifests.Root(), "hack", "build-node-tools.sh"))
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("build the node binaries: %w", err)
			}
			return nil
		}
	}
	return nil
}

func (n *Node) startControlPlane(ctx context.Context) error {
	c, err := cluster.Start(ctx, cluster.Options{
		Dir:       filepath.Join(Base, "cluster"),
		NoMetalLB: true, // MetalLB's controller runs in the cluster
		Controllers: []string{"garbagecollector", "namespace", "deployment", "replicaset", "serviceaccount",
			"root-ca-cert-publisher", "endpointslice", "podgc", "nodelifecycle",
			// Envoy Gateway's certificates are a Job (test/e2e gateways.go).
			"job"},
		APIServer: func(as *envtest.APIServer) error {
			dir := filepath.Join(Base, "certs")
			ca, err := servingCerts(dir, net.ParseIP(NodeIP), net.ParseIP(KubernetesServiceIP))
			if err != nil {
				return err
			}
			port, err := cluster.FreePort()
			if err != nil {
				return err
			}
			as.CertDir = dir
			as.SecureServing.CA = ca
			as.SecureServing.Address = NodeIP
			as.SecureServing.Port = strconv.Itoa(port)
			args := as.Configure()
			// Pods get their ServiceAccount tokens from the admission plugin
			// envtest turns off.
			args.Disable("disable-admission-plugins")
			args.Set("advertise-address", NodeIP)
			args.Set("kubelet-preferred-address-types", "InternalIP")
			return nil
		},
	})
	if err != nil {
		return err
	}
	n.Cluster = c
	return nil
}

func (n *Node) start(name, path string, args ...string) (*cluster.Process, error) {
	p, err := cluster.StartProcess(filepath.Join(Base, "logs"), name, path, args...)
	if err != nil {
		return nil, err
	}
	n.procs[name] = p
	return p, nil
}

func (n *Node) tail(name string) string {
	p := n.procs[name]
	if p == nil {
		return ""
	}
	b, _ := os.ReadFile(p.LogPath)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

func (n *Node) startContainerd() error {
	n.sock = filepath.Join(Base, "containerd", "containerd.sock")
	cfg := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[plugins."io.containerd.internal.v1.opt"]
  path = %[7]q
[ttrpc]
  address = %[4]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[6]q
`, filepath.Join(Base, "containerd", "root"), filepath.Join(Base, "containerd", "state"), n.sock,
		filepath.Join(Base, "containerd", "ttrpc.sock"), pauseImage, filepath.Join(Base, "cni", "net.d"),
		filepath.Join(Base, "containerd", "opt"))
	cfgPath := filepath.Join(Base, "containerd", "config.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return err
	}
	cni := fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "metallb-iad",
  "plugins": [
    {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}], "dataDir": %q}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, bridge, PodCIDR, filepath.Join(Base, "cni", "ipam"))
	if err := os.WriteFile(filepath.Join(Base, "cni", "net.d", "10-metallb-iad.conflist"), []byte(cni), 0o600); err != nil {
		return err
	}
	p, err := n.start("containerd", "/usr/bin/containerd", "--config", cfgPath)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := n.ctr("version"); err == nil {
			return nil
		}
		if p.Exited() || time.Now().After(deadline) {
			return fmt.Errorf("containerd did not come up:\n%s", n.tail("containerd"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (n *Node) ctr(args ...string) (string, error) {
	return run("ctr", append([]string{"--address", n.sock, "--namespace", "k8s.io"}, args...)...)
}

// importImages builds the driver image (the four binaries, as the
// Dockerfile ships them), MetalLB's controller image and Envoy Gateway's
// (from the binaries `make tools` built from their modules) and the pause
// image, writes
// each as a tarball and imports it into containerd.
func (n *Node) importImages() error {
	dir := filepath.Join(Base, "images")
	files := map[string]string{}
	for _, c := range cluster.Controllers {
		out := filepath.Join(dir, "bin", c)
		if err := buildStatic(out, "./cmd/"+c); err != nil {
			return err
		}
		files["/"+c] = out
	}
	pause := filepath.Join(dir, "bin", "pause")
	if err := buildStatic(pause, "./test/node/pause"); err != nil {
		return err
	}
	mlb, err := filepath.EvalSymlinks(filepath.Join(cluster.BinDir(), "metallb-controller"))
	if err != nil {
		return err
	}
	n.MetalLBVersion = strings.TrimPrefix(filepath.Base(filepath.Dir(mlb)), "metallb-controller-")
	eg, err := cluster.EnvoyGatewayVersion()
	if err != nil {
		return err
	}
	images := []Image{
		{Ref: DriverImageRepo + ":" + DriverImageTag, Files: files, User: "65532:65532"},
		// Envoy Gateway's controller, for the e2e feature `gateway`, where
		// its own image has it.
		{Ref: cluster.EnvoyGatewayImage + ":" + eg, Files: map[string]string{"/usr/local/bin/envoy-gateway": filepath.Join(cluster.BinDir(), "envoy-gateway")},
			Entrypoint: []string{"/usr/local/bin/envoy-gateway"}, User: "65532:65532"},
		{Ref: MetalLBImage + ":" + n.MetalLBVersion, Files: map[string]string{"/controller": mlb}, Entrypoint: []string{"/controller"}, User: "65534:65534"},
		{Ref: pauseImage, Files: map[string]string{"/pause": pause}, Entrypoint: []string{"/pause"}, User: "65535:65535"},
	}
	for i, im := range images {
		tarPath := filepath.Join(dir, fmt.Sprintf("image-%d.tar", i))
		if err := im.WriteTarball(tarPath); err != nil {
			return fmt.Errorf("image %s: %w", im.Ref, err)
		}
		if _, err := n.ctr("images", "import", tarPath); err != nil {
			return err
		}
	}
	return nil
}

// ImportBinaryImage builds the main package pkg of the Go module in dir
// as a static binary and imports it into the node as image ref, with the
// binary at path exe as its entrypoint (user 65532, as distroless nonroot).
// The e2e suite builds the real core's image this way.
func (n *Node) ImportBinaryImage(ref, dir, pkg, exe string) error {
	out := filepath.Join(Base, "images", "bin", filepath.Base(exe)+"-"+strings.NewReplacer("/", "-", ":", "-").Replace(ref))
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s in %s: %v: %s", pkg, dir, err, b)
	}
	tarPath := out + ".tar"
	im := Image{Ref: ref, Files: map[string]string{exe: out}, Entrypoint: []string{exe}, User: "65532:65532"}
	if err := im.WriteTarball(tarPath); err != nil {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	_, err := n.ctr("images", "import", tarPath)
	return err
}

func (n *Node) startKubeProxy(ctx context.Context) error {
	hp, err := cluster.FreePort()
	if err != nil {
		return err
	}
	mp, err := cluster.FreePort()
	if err != nil {
		return err
	}
	p, err := n.start("kube-proxy", filepath.Join(n.binDir, "kube-proxy"),
		"--kubeconfig", n.Cluster.Kubeconfig,
		"--hostname-override", NodeName,
		"--proxy-mode=iptables",
		"--cluster-cidr", PodCIDR,
		"--conntrack-max-per-core=0",
		"--conntrack-tcp-timeout-established=0",
		"--conntrack-tcp-timeout-close-wait=0",
		"--iptables-localhost-nodeports=false",
		"--nodeport-addresses", NodeIP+"/32",
		"--healthz-bind-address", fmt.Sprintf("127.0.0.1:%d", hp),
		"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", mp),
	)
	if err != nil {
		return err
	}
	// Ready when the `kubernetes` Service is translated.
	deadline := time.Now().Add(90 * time.Second)
	for {
		out, _ := run("iptables-save", "-t", "nat")
		if strings.Contains(out, "-d "+KubernetesServiceIP+"/32") {
			return nil
		}
		if p.Exited() || time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("kube-proxy did not program the kubernetes Service:\n%s", n.tail("kube-proxy"))
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func (n *Node) startKubelet(ctx context.Context) error {
	kc, err := n.Cluster.UserKubeconfig("system:node:"+NodeName, "system:nodes", "system:masters")
	if err != nil {
		return err
	}
	root := filepath.Join(Base, "kubelet")
	// Pods get a resolver that answers nothing rather than the host's: no
	// lookup may leave the machine.
	resolv := filepath.Join(Base, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 127.0.0.1\n"), 0o644); err != nil {
		return err
	}
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
cgroupsPerQOS: true
enforceNodeAllocatable: []
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%%"
  imagefs.available: "1%%"
  nodefs.inodesFree: "1%%"
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
containerRuntimeEndpoint: unix://%[2]s
podLogsDir: %[3]s
volumePluginDir: %[4]s
resolvConf: %[5]s
syncFrequency: 10s
serializeImagePulls: false
registerNode: true
`, NodeIP, n.sock, filepath.Join(Base, "pod-logs"), filepath.Join(Base, "volume-plugins"), resolv)
	cfgPath := filepath.Join(Base, "kubelet-config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return err
	}
	p, err := n.start("kubelet", filepath.Join(n.binDir, "kubelet"),
		"--config", cfgPath,
		"--kubeconfig", kc,
		"--hostname-override", NodeName,
		"--node-ip", NodeIP,
		"--root-dir", root,
		"--cert-dir", filepath.Join(Base, "kubelet-pki"),
	)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		node := &corev1.Node{}
		if err := n.Cluster.Client.Get(ctx, client.ObjectKey{Name: NodeName}, node); err == nil && ready(node) {
			return nil
		}
		if p.Exited() || time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the node did not become Ready without taints:\n%s", n.tail("kubelet"))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func ready(node *corev1.Node) bool {
	for _, t := range node.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return false
		}
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (n *Node) startScheduler() error {
	_, err := n.start("kube-scheduler", filepath.Join(n.binDir, "kube-scheduler"),
		"--kubeconfig", n.Cluster.Kubeconfig,
		"--authentication-kubeconfig", n.Cluster.Kubeconfig,
		"--authorization-kubeconfig", n.Cluster.Kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
	)
	return err
}

// LogsDir holds every component's log (until Stop removes it).
func LogsDir() string { return filepath.Join(Base, "logs") }

// deletePods deletes every pod and waits until the kubelet has torn their
// sandboxes down (CNI released every address), so CNI cleans up after
// itself before the kubelet stops.
func (n *Node) deletePods(ctx context.Context) error {
	k := n.Cluster.Client
	// Workloads first, or their controllers would make new pods.
	deps := &appsv1.DeploymentList{}
	if err := k.List(ctx, deps); err != nil {
		return err
	}
	for i := range deps.Items {
		_ = k.Delete(ctx, &deps.Items[i])
	}
	rss := &appsv1.ReplicaSetList{}
	_ = k.List(ctx, rss)
	for i := range rss.Items {
		_ = k.Delete(ctx, &rss.Items[i])
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		left := &corev1.PodList{}
		_ = k.List(ctx, left)
		for i := range left.Items {
			if left.Items[i].DeletionTimestamp == nil {
				_ = k.Delete(ctx, &left.Items[i], client.GracePeriodSeconds(0))
			}
		}
		ips, _ := filepath.Glob(filepath.Join(Base, "cni", "ipam", "metallb-iad", "10.*"))
		if len(left.Items) == 0 && len(ips) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d pods and %d pod addresses left after 2m", len(left.Items), len(ips))
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// Stop tears the node down in an order that leaves the machine as Start
// found it: pods (so CNI cleans up), kubelet, the control plane,
// kube-proxy's rules, the guard, cgroups, links, mounts, containerd,
// sysctls. It then compares the machine with the record Start took, and
// returns every difference as an error.
func (n *Node) Stop(ctx context.Context) error {
	if n == nil || n.stopped {
		return nil
	}
	n.stopped = true
	var errs []error
	if n.Cluster != nil && n.procs["kubelet"] != nil && !n.procs["kubelet"].Exited() {
		if err := n.deletePods(ctx); err != nil {
			errs = append(errs, fmt.Errorf("delete pods: %w", err))
		}
	}
	for _, name := range []string{"kube-scheduler", "kubelet"} {
		n.procs[name].Stop(10 * time.Second)
	}
	if n.Cluster != nil {
		n.Cluster.Stop()
	}
	n.procs["kube-proxy"].Stop(10 * time.Second)
	kp := filepath.Join(n.binDir, "kube-proxy")
	if out, err := run(kp, "--cleanup"); err != nil {
		errs = append(errs, fmt.Errorf("kube-proxy --cleanup: %v: %s", err, out))
	}
	removeKubeChains()
	removeKubeProxyTables()
	removeGuard()
	removeCgroups()
	removeLinks()
	n.procs["containerd"].Stop(10 * time.Second)
	cleanMachine(n.host, "")
	unlock(n.lockf)
	if n.host.Sysctls != nil {
		if diff := n.before.Diff(Take()); len(diff) > 0 {
			errs = append(errs, fmt.Errorf("the machine is not as the node found it:\n  %s", strings.Join(diff, "\n  ")))
		}
	}
	return errors.Join(errs...)
}
