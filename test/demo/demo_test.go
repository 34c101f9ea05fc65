package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The demo is tested as a user runs it: its own binary, in a session of its
// own (as a terminal would start it), its exit status and everything it
// printed checked, and no process of the run left afterwards.

var (
	buildOnce sync.Once
	demoBin   string
	buildErr  error
)

// demoBinary builds the demo once per test run.
func demoBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "metallb-iad-demo-test-")
		if err != nil {
			buildErr = err
			return
		}
		demoBin = filepath.Join(dir, "demo")
		out, err := exec.Command("go", "build", "-o", demoBin, ".").CombinedOutput()
		if err != nil {
			buildErr = errors.New(string(out))
		}
	})
	require.NoError(t, buildErr, "build the demo")
	return demoBin
}

// TestMain removes the built demo after the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if demoBin != "" {
		_ = os.RemoveAll(filepath.Dir(demoBin))
	}
	os.Exit(code)
}

// demoRun is the demo binary running in a session (and process group) of its
// own, its standard output collected line by line.
type demoRun struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    bytes.Buffer
	lines  chan string
	done   chan struct{}
	err    error
	stderr bytes.Buffer
}

func startDemo(t *testing.T, args ...string) *demoRun {
	t.Helper()
	r := &demoRun{lines: make(chan string, 1000), done: make(chan struct{})}
	r.cmd = exec.Command(demoBinary(t), args...)
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	r.cmd.Stderr = &r.stderr
	stdout, err := r.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, r.cmd.Start())
	t.Cleanup(func() {
		// A failed test must not leave the run behind: stop it as a user
		// would, and kill it if that does not end it.
		select {
		case <-r.done:
			return
		default:
		}
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGINT)
		select {
		case <-r.done:
		case <-time.After(time.Minute):
			_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
			<-r.done
		}
	})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			r.mu.Lock()
			r.out.WriteString(sc.Text() + "\n")
			r.mu.Unlock()
			select {
			case r.lines <- sc.Text():
			default:
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		r.err = r.cmd.Wait()
		close(r.done)
	}()
	return r
}

func (r *demoRun) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

// wait waits for the run to end and returns its exit status.
func (r *demoRun) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(timeout):
		t.Fatalf("the demo did not end within %s; output:\n%s", timeout, r.output())
	}
	var ee *exec.ExitError
	if errors.As(r.err, &ee) {
		return ee.ExitCode()
	}
	require.NoError(t, r.err)
	return 0
}

// waitForLine waits until the demo prints a line containing s.
func (r *demoRun) waitForLine(t *testing.T, s string, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l := <-r.lines:
			if strings.Contains(l, s) {
				return
			}
		case <-r.done:
			t.Fatalf("the demo ended before printing %q: %v\nstdout:\n%s\nstderr:\n%s", s, r.err, r.output(), r.stderr.String())
		case <-deadline:
			t.Fatalf("the demo did not print %q within %s; output:\n%s", s, timeout, r.output())
		}
	}
}

// assertNoneLeft checks that no process of the run's session is left: the
// control plane, MetalLB and the driver binaries all descend from the demo
// and keep its session.
func assertNoneLeft(t *testing.T, r *demoRun) {
	t.Helper()
	sid := r.cmd.Process.Pid
	var left []string
	require.Eventually(t, func() bool {
		left = processesInSession(sid)
		return len(left) == 0
	}, 30*time.Second, 100*time.Millisecond, "processes of the demo's session still run: %v", func() []string { return left })
}

// processesInSession lists the live (not zombie) processes of session sid.
func processesInSession(sid int) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		// After the command name: state, ppid, pgrp, session.
		f := strings.Fields(s[i+1:])
		if len(f) < 4 || f[0] == "Z" {
			continue
		}
		if got, _ := strconv.Atoi(f[3]); got == sid {
			out = append(out, strconv.Itoa(pid)+" "+s[:i+1])
		}
	}
	return out
}

var ipv4 = regexp.MustCompile(`\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b`)

// assertNoBuggyIPv4 checks that the demo never shows an IPv4 address ending
// in .0 or .255 (a network or broadcast address many clients mishandle).
func assertNoBuggyIPv4(t *testing.T, out string) {
	t.Helper()
	seen := 0
	for _, s := range ipv4.FindAllString(out, -1) {
		a, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		seen++
		b := a.As4()
		assert.False(t, b[3] == 0 || b[3] == 255, "the demo shows %s", s)
	}
	assert.NotZero(t, seen, "the demo shows no IPv4 address at all")
}

// TestDemoNoWait runs the README's `make demo DEMO_ARGS=--no-wait` story
// through, so the demo cannot rot: every step waits for what it announces.
func TestDemoNoWait(t *testing.T) {
	r := startDemo(t, "--no-wait")
	code := r.wait(t, 5*time.Minute)
	out := r.output()
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, r.stderr.String())
	assert.Contains(t, out, "is Bound to 198.51.100.")
	assert.Contains(t, out, "Done: the whole story ran")
	// The Service MetalLB served before the driver is adopted with its
	// address, which it keeps after the old pool is retired.
	legacy := regexp.MustCompile(`Service shop/storefront got (198\.51\.100\.2[0-3]) from pool legacy`).FindStringSubmatch(out)
	require.NotNil(t, legacy, "the legacy Service's address:\n%s", out)
	assert.Contains(t, out, "shop/storefront-imported-")
	assert.Contains(t, out, "shop/storefront still holds "+legacy[1]+", now annotated")
	assert.Contains(t, out, "IPv4 address assigned; shop/storefront still holds "+legacy[1])
	assertNoBuggyIPv4(t, out)
	assertNoneLeft(t, r)
}

var metricsCurl = regexp.MustCompile(`curl -s (http://127\.0\.0\.1:\d+/metrics)`)

// TestDemoStopsCleanlyOnInterrupt stops a waiting demo as a terminal's Ctrl-C
// does (SIGINT to its whole process group): it exits 0, says everything was
// stopped and cleaned up, and leaves no process and no kubeconfig behind.
// While it waits, the metrics endpoint it points at answers.
func TestDemoStopsCleanlyOnInterrupt(t *testing.T) {
	r := startDemo(t)
	r.waitForLine(t, "Ctrl-C stops everything", 5*time.Minute)
	out := r.output()
	assert.Contains(t, out, "kubectl describe ipaddressclaim -n tenant-a db-ip")
	assert.Contains(t, out, "kubectl get ipaddresses.local.sdn.cozystack.io")
	assert.Contains(t, out, "kubectl get ipaddressclaims -A -l metallb.drivers.local.sdn.cozystack.io/imported=true")
	assertNoBuggyIPv4(t, out)

	m := metricsCurl.FindStringSubmatch(out)
	require.NotNil(t, m, "no curl line for the metrics endpoint:\n%s", out)
	resp, err := http.Get(m[1])
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Contains(t, string(body), `metallb_iad_addresses{class="public"`)

	kc := regexp.MustCompile(`export KUBECONFIG=(\S+)`).FindStringSubmatch(out)
	require.NotNil(t, kc)
	require.FileExists(t, kc[1])

	require.NoError(t, syscall.Kill(-r.cmd.Process.Pid, syscall.SIGINT))
	code := r.wait(t, 2*time.Minute)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", r.output(), r.stderr.String())
	assert.Contains(t, r.output(), stoppedMessage)
	assert.Empty(t, r.stderr.String())
	assertNoneLeft(t, r)
	assert.NoDirExists(t, filepath.Dir(kc[1]), "the cluster's temporary folder is removed")
}

func TestExitCode(t *testing.T) {
	failed := errors.New("boom")
	for _, tc := range []struct {
		name        string
		err         error
		interrupted bool
		want        int
	}{
		{"the story ran through", nil, false, 0},
		{"stopped by the user while waiting", nil, true, 0},
		{"stopped by the user mid-story", failed, true, 0},
		{"a step failed", failed, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, exitCode(tc.err, tc.interrupted))
		})
	}
}
