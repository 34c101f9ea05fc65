package main

import (
	"os"
	"os/signal"
	"syscall"
	"unsafe"
)

// foreground moves the demo into a process group of its own and makes that
// group the terminal's foreground group, so a Ctrl-C reaches the demo (which
// then stops everything it started) but not the `make` or `go run` that
// started it: GNU make, interrupted itself, re-raises SIGINT and ends with
// status 130 however its recipe ends. It returns a function that gives the terminal back
// to the original group. Without a controlling terminal, in the background,
// or when the demo already leads the foreground group (run straight from a
// shell), it changes nothing.
func foreground() (giveBack func()) {
	nothing := func() {}
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return nothing
	}
	fd := tty.Fd()
	orig, err := tcgetpgrp(fd)
	if err != nil || orig != syscall.Getpgrp() || orig == syscall.Getpid() {
		_ = tty.Close()
		return nothing
	}
	// A process outside the foreground group may hand the terminal over only
	// with SIGTTOU ignored (shells do the same).
	signal.Ignore(syscall.SIGTTOU)
	if err := syscall.Setpgid(0, 0); err != nil {
		_ = tty.Close()
		return nothing
	}
	if err := tcsetpgrp(fd, syscall.Getpgrp()); err != nil {
		_ = syscall.Setpgid(0, orig)
		_ = tty.Close()
		return nothing
	}
	return func() {
		_ = tcsetpgrp(fd, orig)
		_ = tty.Close()
	}
}

func tcgetpgrp(fd uintptr) (int, error) {
	var pgrp int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCGPGRP, uintptr(unsafe.Pointer(&pgrp))); e != 0 {
		return 0, e
	}
	return int(pgrp), nil
}

func tcsetpgrp(fd uintptr, pgrp int) error {
	p := int32(pgrp)
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCSPGRP, uintptr(unsafe.Pointer(&p))); e != 0 {
		return e
	}
	return nil
}
