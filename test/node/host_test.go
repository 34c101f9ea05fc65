package node

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cozystack/metallb-iad/test/cluster"
)

// needMachine skips unless the node's machine-wide pieces can run: root and
// the Debian packages (make test-node installs them), and takes the lock.
func needMachine(t *testing.T) {
	t.Helper()
	if os.Getenv("E2E_PROVIDER") != "node" {
		t.Skip("changes machine-wide state (links, iptables, cgroups, sysctls): runs with make test-node (E2E_PROVIDER=node)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: the node changes links, iptables, cgroups and mounts")
	}
	for pkg, f := range packages {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("needs the Debian package %s (make test-node installs it)", pkg)
		}
	}
	f, err := lock(10 * time.Minute)
	require.NoError(t, err)
	t.Cleanup(func() { unlock(f) })
	recoverDeadRun("")
}

// TestRecoverDeadRun leaves on the machine what a run that died half-way
// leaves (the node's links and guard, a KUBE-* chain, a kubelet cgroup, a
// mount under the node's root, containerd running, a changed sysctl), and
// checks that the next run's recovery takes the machine back to how it was.
func TestRecoverDeadRun(t *testing.T) {
	needMachine(t)
	before := Take()
	h := recordHost()
	for _, d := range []string{"logs", "cni/net.d", "containerd", "kubelet/pods/x"} {
		require.NoError(t, os.MkdirAll(filepath.Join(Base, d), 0o700))
	}
	require.NoError(t, saveHost(h))

	require.NoError(t, addNodeAddress())
	require.NoError(t, addGuard())
	for _, ifc := range defaultRouteInterfaces() {
		_, err := run("iptables", "-w", "-C", guardChain, "-o", ifc, "-d", "10.96.0.0/16", "-j", "REJECT", "--reject-with", "icmp-port-unreachable")
		assert.NoError(t, err, "the guard rejects Service traffic on %s", ifc)
	}
	for _, ip := range []string{"10.96.0.10", "fd00:10:96::10"} {
		if strings.Contains(ip, ":") {
			if _, err := os.Stat("/proc/net/if_inet6"); err != nil {
				continue
			}
		}
		out, err := run("ip", "route", "get", ip)
		require.NoError(t, err)
		assert.Contains(t, out, " dev "+vethNode+" ", "the Service IP %s is routed to the node's link, not the default route", ip)
	}
	out, err := run("iptables", "-w", "-S", "OUTPUT")
	require.NoError(t, err)
	assert.Contains(t, out, "-A OUTPUT -j "+guardChain+"\n", "the guard is jumped to from OUTPUT")
	_, err = run("iptables", "-w", "-t", "nat", "-N", "KUBE-SERVICES")
	require.NoError(t, err)
	_, err = run("iptables", "-w", "-t", "nat", "-I", "PREROUTING", "-j", "KUBE-SERVICES")
	require.NoError(t, err)
	if _, err := exec.LookPath("nft"); err == nil {
		// What kube-proxy's nftables mode leaves.
		_, err := run("nft", "add", "table", "ip", "kube-proxy")
		require.NoError(t, err)
		assert.Contains(t, nftTables(), "ip kube-proxy")
	}
	cg := "/sys/fs/cgroup/memory/kubepods/besteffort/pod-dead"
	if _, err := os.Stat("/sys/fs/cgroup/memory"); err == nil {
		require.NoError(t, os.MkdirAll(cg, 0o755))
	}
	mnt := filepath.Join(Base, "kubelet", "pods", "x")
	require.NoError(t, syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"))
	// A sysctl the kubelet raises, and harmless to change for a moment.
	keys, err := readSysctl("kernel.keys.root_maxkeys")
	require.NoError(t, err)
	n0, err := strconv.Atoi(keys)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(sysctlPath("kernel.keys.root_maxkeys"), []byte(strconv.Itoa(n0+1)), 0o644))
	n := &Node{procs: map[string]*cluster.Process{}}
	require.NoError(t, n.startContainerd())

	left := before.Diff(Take())
	require.NotEmpty(t, left)
	t.Logf("a dead run left:\n  %s", strings.Join(left, "\n  "))

	require.True(t, recoverDeadRun(""))
	assert.Empty(t, before.Diff(Take()), "the machine is as it was")
	_, err = os.Stat(Base)
	assert.True(t, os.IsNotExist(err), "the node's root is gone")
}
