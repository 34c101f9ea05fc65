package node

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cozystack/metallb-iad/test/cluster"
)

// Everything the node touches on the machine is named here, so a run that
// died can be cleaned up by the next one without guessing.
const (
	// Base holds the node's state: containerd's root, the kubelet's root,
	// CNI configuration and IPAM, logs, and the record of the machine
	// before the first run (host.json).
	Base = "/var/lib/metallb-iad-node"
	// lockPath is the machine-wide lock: one node per machine at a time.
	lockPath = "/run/metallb-iad-node.lock"

	// NodeName is the node's name.
	NodeName = "metallb-iad-node"
	// NodeIP is the node's address, on one end of a veth pair: the kernel
	// here has no dummy interfaces. The API server binds to it.
	NodeIP   = "10.87.0.1"
	vethNode = "iadnode0"
	vethPeer = "iadnode1"
	// PodCIDR is the CNI bridge's range.
	PodCIDR = "10.88.0.0/24"
	bridge  = "iadbr0"
	// KubernetesServiceIP is the first address of the Service range: the
	// API server's certificate must name it.
	KubernetesServiceIP = "10.96.0.1"

	guardChain = "METALLB-IAD-GUARD"
)

// guardedV4 and guardedV6 are the ranges whose packets must never follow
// the default route: the Service ranges and the pod range.
var (
	guardedV4 = []string{"10.96.0.0/16", PodCIDR, "10.87.0.0/24"}
	guardedV6 = []string{"fd00:10:96::/108"}
)

// sysctls the kubelet, kube-proxy or CNI may change; they are recorded
// before the first start and restored at teardown.
var sysctls = []string{
	"vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
	"kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes",
	"net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding", "net.ipv4.conf.all.route_localnet",
	"net.bridge.bridge-nf-call-iptables", "net.bridge.bridge-nf-call-ip6tables",
	"net.netfilter.nf_conntrack_max",
}

// machinePaths are paths outside Base the node's components may create.
var machinePaths = []string{
	"/var/lib/cni", "/var/log/containers", "/var/log/pods", "/run/netns", "/var/run/netns",
	"/etc/cni", "/opt/cni", "/var/lib/kubelet", "/usr/libexec/kubernetes", "/run/containerd",
	"/var/lib/containerd", "/etc/kubernetes", "/opt/containerd",
}

// ourRoutes lists the routes, in every table, through a link the node
// could have made or to one of the node's ranges.
func ourRoutes() []string {
	ranges := map[string]bool{}
	for _, r := range append(append(append([]string{}, guardedV4...), guardedV6...), serviceRanges()...) {
		ranges[r] = true
	}
	var out []string
	for _, fam := range []string{"-4", "-6"} {
		o, _ := run("ip", fam, "-o", "route", "show", "table", "all")
		for _, l := range strings.Split(o, "\n") {
			f := strings.Fields(l)
			if len(f) == 0 {
				continue
			}
			ours := ranges[f[0]]
			for i := 0; i+1 < len(f); i++ {
				if f[i] == "dev" && ourLink(f[i+1]) {
					ours = true
				}
			}
			if ours {
				out = append(out, fam+" "+strings.Join(f, " "))
			}
		}
	}
	return out
}

// ourLink and ourMount tell whether a link or mount point is one the node could have
// made; the leftover check looks at these only, so other activity on the
// machine does not count against the node.
func ourLink(name string) bool {
	return strings.HasPrefix(name, "iad") || strings.HasPrefix(name, "veth") || strings.HasPrefix(name, "cni")
}

func ourMount(m string) bool {
	for _, p := range []string{Base, "/run/netns", "/var/run/netns", "/run/containerd", "/var/lib/kubelet", "/var/lib/containerd", "/sys/fs/cgroup"} {
		if m == p || strings.HasPrefix(m, p+"/") {
			return true
		}
	}
	return false
}

// Host is the record of the machine before the node started: what teardown
// restores and what the leftover check compares with.
type Host struct {
	Sysctls map[string]string `json:"sysctls"`
	Paths   map[string]bool   `json:"paths"`
}

func recordHost() Host {
	h := Host{Sysctls: map[string]string{}, Paths: map[string]bool{}}
	for _, k := range sysctls {
		if v, err := readSysctl(k); err == nil {
			h.Sysctls[k] = v
		}
	}
	for _, p := range machinePaths {
		_, err := os.Lstat(p)
		h.Paths[p] = err == nil
	}
	return h
}

func sysctlPath(k string) string { return filepath.Join("/proc/sys", strings.ReplaceAll(k, ".", "/")) }

func readSysctl(k string) (string, error) {
	b, err := os.ReadFile(sysctlPath(k))
	return strings.TrimSpace(string(b)), err
}

// lock takes the machine-wide lock, waiting up to timeout. The kernel
// releases it when the process dies, however it dies.
//
// unlock removes the file, so a waiter may hold the lock on a file no longer
// at lockPath: it then lets go and locks the file now there.
func lock(timeout time.Duration) (*os.File, error) {
	deadline := time.Now().Add(timeout)
	for {
		f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
			held, err1 := f.Stat()
			there, err2 := os.Stat(lockPath)
			if err1 == nil && err2 == nil && os.SameFile(held, there) {
				return f, nil
			}
		}
		f.Close()
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("another node runs on this machine (%s is locked)", lockPath)
		}
		time.Sleep(time.Second)
	}
}

func unlock(f *os.File) {
	if f != nil {
		_ = os.Remove(lockPath)
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}
}

func run(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// defaultRouteInterfaces names the interfaces of the default routes (v4 and v6).
func defaultRouteInterfaces() []string {
	seen := map[string]bool{}
	var out []string
	for _, fam := range []string{"-4", "-6"} {
		o, _ := run("ip", fam, "route", "show", "default")
		f := strings.Fields(o)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "dev" && !seen[f[i+1]] {
				seen[f[i+1]] = true
				out = append(out, f[i+1])
			}
		}
	}
	return out
}

// addGuard installs the guard chain, jumped to first from OUTPUT and
// FORWARD: nothing addressed to the Service or pod ranges, and nothing
// coming from a pod, leaves through a default-route interface.
func addGuard() error {
	ifaces := defaultRouteInterfaces()
	if len(ifaces) == 0 {
		return nil // no default route: nothing can leave by it
	}
	for _, fam := range []struct {
		cmd    string
		ranges []string
		reject string
	}{{"iptables", guardedV4, "icmp-port-unreachable"}, {"ip6tables", guardedV6, "icmp6-port-unreachable"}} {
		if _, err := run(fam.cmd, "-w", "-N", guardChain); err != nil {
			return err
		}
		for _, ifc := range ifaces {
			for _, r := range fam.ranges {
				if _, err := run(fam.cmd, "-w", "-A", guardChain, "-o", ifc, "-d", r, "-j", "REJECT", "--reject-with", fam.reject); err != nil {
					return err
				}
				if _, err := run(fam.cmd, "-w", "-A", guardChain, "-o", ifc, "-s", r, "-j", "REJECT", "--reject-with", fam.reject); err != nil {
					return err
				}
			}
			if _, err := run(fam.cmd, "-w", "-A", guardChain, "-i", bridge, "-o", ifc, "-j", "REJECT", "--reject-with", fam.reject); err != nil {
				return err
			}
		}
		for _, chain := range []string{"OUTPUT", "FORWARD"} {
			if _, err := run(fam.cmd, "-w", "-I", chain, "1", "-j", guardChain); err != nil {
				return err
			}
		}
	}
	return nil
}

// removeGuard removes the guard chain and its jumps; absent is fine.
func removeGuard() {
	for _, cmd := range []string{"iptables", "ip6tables"} {
		for _, chain := range []string{"OUTPUT", "FORWARD"} {
			for {
				if _, err := run(cmd, "-w", "-D", chain, "-j", guardChain); err != nil {
					break
				}
			}
		}
		_, _ = run(cmd, "-w", "-F", guardChain)
		_, _ = run(cmd, "-w", "-X", guardChain)
	}
}

// removeKubeChains deletes every KUBE-* chain (and the jumps to them) that
// kube-proxy --cleanup or the kubelet left.
func removeKubeChains() {
	for _, cmd := range []string{"iptables", "ip6tables"} {
		out, err := run(cmd + "-save")
		if err != nil {
			continue
		}
		table := ""
		var jumps [][]string
		chains := map[string][]string{}
		for _, l := range strings.Split(out, "\n") {
			switch {
			case strings.HasPrefix(l, "*"):
				table = l[1:]
			case strings.HasPrefix(l, ":KUBE-"):
				chains[table] = append(chains[table], strings.Fields(l[1:])[0])
			case strings.HasPrefix(l, "-A ") && strings.Contains(l, " KUBE-") && !strings.HasPrefix(l, "-A KUBE-"):
				jumps = append(jumps, append([]string{table}, strings.Fields(l)...))
			}
		}
		for _, j := range jumps {
			// -A CHAIN rest... -> -t table -D CHAIN rest...
			args := append([]string{"-w", "-t", j[0], "-D"}, j[2:]...)
			_, _ = run(cmd, args...)
		}
		for t, cs := range chains {
			for _, c := range cs {
				_, _ = run(cmd, "-w", "-t", t, "-F", c)
			}
			for _, c := range cs {
				_, _ = run(cmd, "-w", "-t", t, "-X", c)
			}
		}
	}
}

// iptablesTables are the nftables tables iptables-nft keeps; their rules
// are compared through iptables-save.
var iptablesTables = map[string]bool{"filter": true, "nat": true, "mangle": true, "raw": true, "security": true}

// nftTables lists the nftables tables iptables does not manage, such as the
// one kube-proxy's nftables mode makes ("family name"); none without nft.
func nftTables() []string {
	if _, err := exec.LookPath("nft"); err != nil {
		return nil
	}
	out, _ := run("nft", "list", "tables")
	var ts []string
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) != 3 || f[0] != "table" {
			continue
		}
		if (f[1] == "ip" || f[1] == "ip6") && iptablesTables[f[2]] {
			continue
		}
		ts = append(ts, f[1]+" "+f[2])
	}
	return ts
}

// removeKubeProxyTables deletes the tables kube-proxy's nftables mode makes,
// in case --cleanup could not.
func removeKubeProxyTables() {
	for _, t := range nftTables() {
		if fam, name, _ := strings.Cut(t, " "); name == "kube-proxy" {
			_, _ = run("nft", "delete", "table", fam, name)
		}
	}
}

func linkExists(name string) bool {
	_, err := net.InterfaceByName(name)
	return err == nil
}

// addNodeAddress creates the veth pair that carries the node IP.
func addNodeAddress() error {
	if !linkExists(vethNode) {
		if _, err := run("ip", "link", "add", vethNode, "type", "veth", "peer", "name", vethPeer); err != nil {
			return err
		}
	}
	_, _ = run("ip", "addr", "add", NodeIP+"/24", "dev", vethNode)
	for _, l := range []string{vethNode, vethPeer} {
		if _, err := run("ip", "link", "set", l, "up"); err != nil {
			return err
		}
	}
	// The Service ranges are routed to the node's link, not the default
	// route. A connection from this machine to a Service IP takes its
	// route, and its source address, before kube-proxy's DNAT picks a pod;
	// the filter OUTPUT chain still sees that first route's interface. By
	// the default route, the guard would reject every such connection to a
	// pod, and without kube-proxy the packet would head for the default
	// route. The routes go with the link.
	for _, r := range serviceRanges() {
		fam := "-4"
		if strings.Contains(r, ":") {
			fam = "-6"
			if _, err := os.Stat("/proc/net/if_inet6"); err != nil {
				continue // no IPv6 on this machine: nothing to route
			}
		}
		if _, err := run("ip", fam, "route", "replace", r, "dev", vethNode); err != nil {
			return err
		}
	}
	return nil
}

// serviceRanges are the API server's Service ranges.
func serviceRanges() []string { return strings.Split(cluster.ServiceCIDRs, ",") }

func removeLinks() {
	for _, l := range []string{bridge, vethNode} {
		if linkExists(l) {
			_, _ = run("ip", "link", "delete", l)
		}
	}
}

// unmountUnder unmounts every mount at or below one of roots, deepest first.
func unmountUnder(roots ...string) {
	for i := 0; i < 3; i++ {
		var ms []string
		for _, m := range mounts() {
			for _, r := range roots {
				if m == r || strings.HasPrefix(m, r+"/") {
					ms = append(ms, m)
				}
			}
		}
		if len(ms) == 0 {
			return
		}
		sort.Slice(ms, func(a, b int) bool { return len(ms[a]) > len(ms[b]) })
		for _, m := range ms {
			_ = syscall.Unmount(m, syscall.MNT_DETACH)
		}
	}
}

// mounts lists the mount points of this mount namespace.
func mounts() []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 {
			out = append(out, unescapeMount(f[4]))
		}
	}
	return out
}

func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// kubepodsCgroups lists the kubelet's cgroup trees (kubepods*) under every
// cgroup hierarchy.
func kubepodsCgroups() []string {
	var out []string
	roots, _ := filepath.Glob("/sys/fs/cgroup/*")
	roots = append(roots, "/sys/fs/cgroup")
	for _, r := range roots {
		ms, _ := filepath.Glob(filepath.Join(r, "kubepods*"))
		out = append(out, ms...)
	}
	return out
}

// removeCgroups kills whatever still runs in the kubelet's cgroups and
// removes them, deepest first.
func removeCgroups() {
	for i := 0; i < 20; i++ {
		var dirs []string
		for _, root := range kubepodsCgroups() {
			_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, p)
				}
				return nil
			})
		}
		if len(dirs) == 0 {
			return
		}
		for _, d := range dirs {
			b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		sort.Slice(dirs, func(a, b int) bool { return len(dirs[a]) > len(dirs[b]) })
		for _, d := range dirs {
			_ = syscall.Rmdir(d)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ourProcesses lists processes of the node: the node binaries and
// containerd with its shims, recognised by their command lines naming Base
// or by their executable's name.
func ourProcesses() []int {
	names := map[string]bool{"kubelet": true, "kube-proxy": true, "kube-scheduler": true, "containerd": true, "containerd-shim-runc-v2": true, "containerd-shim": true}
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(cmd) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmd), "\x00"), "\x00")
		if names[filepath.Base(args[0])] || strings.Contains(string(cmd), Base) {
			out = append(out, pid)
		}
	}
	return out
}

func killOurProcesses() {
	for i := 0; i < 50; i++ {
		ps := ourProcesses()
		if len(ps) == 0 {
			return
		}
		for _, p := range ps {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func restoreSysctls(h Host) {
	for k, v := range h.Sysctls {
		if cur, err := readSysctl(k); err == nil && cur != v {
			_ = os.WriteFile(sysctlPath(k), []byte(v), 0o644)
		}
	}
}

func hostRecordPath() string { return filepath.Join(Base, "host.json") }

func saveHost(h Host) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	return os.WriteFile(hostRecordPath(), b, 0o600)
}

func loadHost() (Host, bool) {
	b, err := os.ReadFile(hostRecordPath())
	if err != nil {
		return Host{}, false
	}
	var h Host
	return h, json.Unmarshal(b, &h) == nil
}

// cleanMachine takes the machine back to how host recorded it, in the
// teardown order: processes, kube-proxy's and the guard's rules, cgroups,
// links, mounts, then sysctls and files. It is idempotent, and it is what
// the next run does after a run that died.
func cleanMachine(h Host, kubeProxy string) {
	killOurProcesses()
	if kubeProxy != "" {
		_, _ = run(kubeProxy, "--cleanup")
	}
	removeKubeChains()
	removeKubeProxyTables()
	removeGuard()
	removeCgroups()
	removeLinks()
	netns, _ := filepath.Glob("/run/netns/cni-*")
	for _, n := range netns {
		unmountUnder(n)
		_ = os.Remove(n)
	}
	unmountUnder(Base)
	killOurProcesses()
	restoreSysctls(h)
	for p, existed := range h.Paths {
		if !existed {
			_ = os.RemoveAll(p)
		}
	}
	_ = os.RemoveAll(Base)
}

// recoverDeadRun takes the machine back to the record a run that died
// left in Base, and tells whether there was one. Call it holding the lock.
func recoverDeadRun(kubeProxy string) bool {
	if _, err := os.Stat(Base); err != nil {
		return false
	}
	h, ok := loadHost()
	if !ok {
		h = recordHost()
	}
	cleanMachine(h, kubeProxy)
	return true
}

// Snapshot is what the leftover check compares: the processes of the node,
// mount points, kubelet cgroups, links, iptables rules and sysctls.
type Snapshot struct {
	Processes []string
	Mounts    []string
	Cgroups   []string
	Links     []string
	Routes    []string
	Rules     []string
	NFTables  []string
	Sysctls   []string
	Paths     []string
}

// Take records the machine's state now.
func Take() Snapshot {
	var s Snapshot
	for _, p := range ourProcesses() {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		s.Processes = append(s.Processes, strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " "))
	}
	for _, m := range mounts() {
		if ourMount(m) {
			s.Mounts = append(s.Mounts, m)
		}
	}
	s.Cgroups = kubepodsCgroups()
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		if ourLink(i.Name) {
			s.Links = append(s.Links, i.Name)
		}
	}
	s.Routes = ourRoutes()
	for _, cmd := range []string{"iptables-save", "ip6tables-save"} {
		out, _ := run(cmd)
		table := ""
		for _, l := range strings.Split(out, "\n") {
			switch {
			case strings.HasPrefix(l, "*"):
				table = l[1:]
			case strings.HasPrefix(l, "-A "):
				s.Rules = append(s.Rules, cmd+" -t "+table+" "+l)
			case strings.HasPrefix(l, ":"):
				// Counters change with traffic. A built-in chain counts only
				// when its policy is not the default: an empty table with
				// accepting built-in chains acts as no table at all.
				f := strings.Fields(l)
				if len(f) >= 2 && (f[1] == "-" || f[1] != "ACCEPT") {
					s.Rules = append(s.Rules, cmd+" -t "+table+" "+f[0]+" "+f[1])
				}
			}
		}
	}
	s.NFTables = nftTables()
	for _, k := range sysctls {
		if v, err := readSysctl(k); err == nil {
			s.Sysctls = append(s.Sysctls, k+"="+v)
		}
	}
	for _, p := range machinePaths {
		if _, err := os.Lstat(p); err == nil {
			s.Paths = append(s.Paths, p)
		}
	}
	return s
}

// Diff describes how now differs from before, one line per difference;
// empty when the machine is as it was.
func (before Snapshot) Diff(now Snapshot) []string {
	var out []string
	cmp := func(what string, a, b []string) {
		in := func(xs []string) map[string]int {
			m := map[string]int{}
			for _, x := range xs {
				m[x]++
			}
			return m
		}
		ma, mb := in(a), in(b)
		for x, n := range mb {
			if ma[x] < n {
				out = append(out, fmt.Sprintf("%s left behind: %s", what, x))
			}
		}
		for x, n := range ma {
			if mb[x] < n {
				out = append(out, fmt.Sprintf("%s gone: %s", what, x))
			}
		}
	}
	cmp("process", before.Processes, now.Processes)
	cmp("mount", before.Mounts, now.Mounts)
	cmp("cgroup", before.Cgroups, now.Cgroups)
	cmp("link", before.Links, now.Links)
	cmp("route", before.Routes, now.Routes)
	cmp("iptables", before.Rules, now.Rules)
	cmp("nftables table", before.NFTables, now.NFTables)
	cmp("sysctl", before.Sysctls, now.Sysctls)
	cmp("path", before.Paths, now.Paths)
	sort.Strings(out)
	return out
}

// ErrSkip marks why the node cannot run on this machine.
var ErrSkip = errors.New("the node provider cannot run here")
