package main

import (
	"os"
	"os/signal"
	"syscall"
	"unsafe"
)

// takeTerminal makes this process's own process group the terminal's
// foreground group, when it was started in the foreground of a terminal
// (under make, its group is make's), so that Ctrl-C interrupts this process
// and not make: make then sees the exit status this process chooses. The
// returned function gives the terminal back. Without a terminal, or when
// started in the background, it does nothing.
func takeTerminal() (restore func()) {
	noop := func() {}
	fd := int(os.Stdin.Fd())
	orig, err := tcgetpgrp(fd)
	if err != nil || orig != syscall.Getpgrp() {
		return noop
	}
	if syscall.Getpid() == orig {
		return noop // already the leader of the foreground group
	}
	// A background group that sets the foreground is sent SIGTTOU.
	signal.Ignore(syscall.SIGTTOU)
	if err := syscall.Setpgid(0, 0); err != nil {
		signal.Reset(syscall.SIGTTOU)
		return noop
	}
	if err := tcsetpgrp(fd, syscall.Getpid()); err != nil {
		_ = syscall.Setpgid(0, orig)
		signal.Reset(syscall.SIGTTOU)
		return noop
	}
	return func() { _ = tcsetpgrp(fd, orig) }
}

func tcgetpgrp(fd int) (int, error) {
	var pgrp int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), uintptr(syscall.TIOCGPGRP), uintptr(unsafe.Pointer(&pgrp))); e != 0 {
		return 0, e
	}
	return int(pgrp), nil
}

func tcsetpgrp(fd, pgrp int) error {
	p := int32(pgrp)
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), uintptr(syscall.TIOCSPGRP), uintptr(unsafe.Pointer(&p))); e != 0 {
		return e
	}
	return nil
}
