package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is a child process the harness started: it dies with the test
// process (parent-death signal), lives in its own process group so it can be
// killed whole, and logs to a file.
type Process struct {
	Name    string
	LogPath string

	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	err  error
}

// StartProcess starts path with args, logging to dir/<name>.log.
func StartProcess(dir, name, path string, args ...string) (*Process, error) {
	return startProcess(dir, name, path, nil, args...)
}

// startProcess is StartProcess with env added to the harness's own
// environment.
func startProcess(dir, name, path string, env []string, args ...string) (*Process, error) {
	logPath := fmt.Sprintf("%s/%s.log", dir, name)
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	track(cmd.Process.Pid)
	go func() {
		err := cmd.Wait()
		logf.Close()
		untrack(cmd.Process.Pid)
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Done is closed when the process ends.
func (p *Process) Done() <-chan struct{} { return p.done }

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the whole process group.
func (p *Process) Signal(sig syscall.Signal) {
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
}

// Stop asks the process to end (SIGTERM), then kills it after grace.
func (p *Process) Stop(grace time.Duration) {
	if p == nil || p.Exited() {
		return
	}
	p.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.Signal(syscall.SIGKILL)
		<-p.done
	}
}

// Kill ends the process group at once, as a crash would.
func (p *Process) Kill() {
	if p == nil || p.Exited() {
		return
	}
	p.Signal(syscall.SIGKILL)
	<-p.done
}

// FreePort returns a TCP port on loopback that was free a moment ago.
//
// It is picked at random below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), never from it: a port the kernel hands out
// for a listen on port 0 comes from the same range as the source ports of
// outgoing connections, and every test process here opens hundreds of those
// (to etcd, to the API server), so such a port was at times taken by a
// connection between the check and the child's bind. Below the range only
// another listener can take it, and a random pick makes two test processes
// choosing the same one unlikely; ErrAddrInUse covers the rest.
func FreePort() (int, error) {
	lo := ephemeralLow()
	const base = 10000
	for i := 0; i < 100; i++ {
		port := base + portRand.IntN(lo-base)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		l.Close()
		return port, nil
	}
	return 0, fmt.Errorf("no free loopback port between %d and %d", base, lo)
}

var portRand = rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(os.Getpid())))

// ephemeralLow is the lowest port the kernel uses for outgoing connections.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if lo, err := strconv.Atoi(f[0]); err == nil && lo > 11000 {
				return lo
			}
		}
	}
	return 32768
}

// AddrInUse reports whether a process's log says it could not bind a port
// that FreePort returned, because something else bound it first.
func AddrInUse(p *Process) bool {
	b, _ := os.ReadFile(p.LogPath)
	return strings.Contains(string(b), "address already in use")
}

// WaitTCP waits until something listens on addr.
func WaitTCP(ctx context.Context, addr string) error {
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nothing listens on %s: %w", addr, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Every started process is tracked so an interrupt (SIGINT, SIGTERM) of the
// test or demo process still ends them all; Pdeathsig covers SIGKILL.
var (
	trackedMu sync.Mutex
	tracked   = map[int]bool{}
)

func track(pid int)   { trackedMu.Lock(); tracked[pid] = true; trackedMu.Unlock() }
func untrack(pid int) { trackedMu.Lock(); delete(tracked, pid); trackedMu.Unlock() }

// KillAll kills every process group the harness started and still runs.
func KillAll() {
	trackedMu.Lock()
	defer trackedMu.Unlock()
	for pid := range tracked {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}
