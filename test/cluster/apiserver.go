package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RestartAPIServer kills kube-apiserver outright, as a crash would, and
// starts it again with the same flags, certificates, port and etcd, so
// nothing stored is lost: every client sees its requests fail and its
// watches break until the server is back. It returns once the server
// answers the admin again.
func (c *Cluster) RestartAPIServer(ctx context.Context) error {
	c.apiMu.Lock()
	defer c.apiMu.Unlock()
	if c.apiserver == nil {
		pid, err := childRunning(filepath.Join(BinDir(), "kube-apiserver"))
		if err != nil {
			return err
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			return err
		}
		for _, a := range bytes.Split(bytes.TrimRight(raw, "\x00"), []byte{0}) {
			c.apiArgs = append(c.apiArgs, string(a))
		}
		// The process is envtest's child: its own wait reaps it.
		_ = syscall.Kill(pid, syscall.SIGKILL)
		for deadline := time.Now().Add(20 * time.Second); processAlive(pid); {
			if time.Now().After(deadline) {
				return fmt.Errorf("kube-apiserver (pid %d) did not die", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	} else {
		c.apiserver.Kill()
	}
	wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	var p *Process
	start := func() (err error) {
		c.apiRestarts++
		if p, err = StartProcess(c.Dir, fmt.Sprintf("kube-apiserver-%d", c.apiRestarts), c.apiArgs[0], c.apiArgs[1:]...); err == nil {
			c.apiserver = p
		}
		return err
	}
	if err := start(); err != nil {
		return err
	}
	for {
		err := c.Client.Get(wctx, client.ObjectKey{Name: "default"}, &corev1.Namespace{})
		if err == nil {
			return nil
		}
		if p.Exited() {
			// The port is free only while nothing else binds it: until then
			// a socket still bound to it (the old process's, lingering)
			// makes the listen fail; try again.
			if !portInUse(p.LogPath) {
				return fmt.Errorf("kube-apiserver exited after a restart; see %s", p.LogPath)
			}
			if err := start(); err != nil {
				return err
			}
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("kube-apiserver did not come back: %w (last error: %v)", wctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// portInUse reports whether a kube-apiserver log says its port was taken.
func portInUse(logPath string) bool {
	b, err := os.ReadFile(logPath)
	return err == nil && bytes.Contains(b, []byte("address already in use"))
}

// childRunning returns the pid of this process's child running the binary path.
func childRunning(path string) (int, error) {
	want, err := filepath.EvalSymlinks(path)
	if err != nil {
		return 0, err
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || parentOf(pid) != os.Getpid() {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && exe == want {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no child process runs %s", path)
}

// processAlive reports whether pid exists and is not a zombie.
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// KillMetalLB kills the MetalLB controller outright, as a crash would.
func (c *Cluster) KillMetalLB() { c.metallb.Kill() }
