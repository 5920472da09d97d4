package rie

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// maxMemoryUsed matches the figure RIE puts on a REPORT line. RIE prints the
// configured memory size there, not a measurement.
var maxMemoryUsed = regexp.MustCompile(`Max Memory Used: [0-9]+ MB`)

// withPeakMemory replaces the Max Memory Used figure of a REPORT line by the
// peak resident set size of the environment's runtime process (VmHWM, which
// like Lambda's figure is the high-water mark of the environment since it
// started), in MB rounded up. When the runtime cannot be found (it has
// exited: a crash or a timeout killed it) the line says so instead of
// repeating the memory size.
func (in *instance) withPeakMemory(line string, riePID int) string {
	if !maxMemoryUsed.MatchString(line) {
		return line
	}
	kb, ok := in.runtimePeakKB(riePID)
	figure := "Max Memory Used: unknown (the runtime had exited)"
	if ok {
		figure = fmt.Sprintf("Max Memory Used: %d MB", (kb+1023)/1024)
	}
	return maxMemoryUsed.ReplaceAllLiteralString(line, figure)
}

// runtimePeakKB returns VmHWM of the runtime process the emulator riePID
// started: the cached pid while it is still that emulator's child, else the
// child found by scanning /proc.
func (in *instance) runtimePeakKB(riePID int) (int, bool) {
	in.mu.Lock()
	pid := in.runtimePID
	in.mu.Unlock()
	if pid == 0 || parentOf(pid) != riePID {
		pid = childOf(riePID, filepath.Base(in.fn.cfg.Bootstrap))
		in.mu.Lock()
		in.runtimePID = pid
		in.mu.Unlock()
	}
	if pid == 0 {
		return 0, false
	}
	return peakRSSKB(pid)
}

// parentOf returns pid's parent pid from /proc/<pid>/stat, or 0.
func parentOf(pid int) int {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses,
	// so read after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// childOf returns the pid of a process whose parent is ppid and whose
// command name is comm (as /proc/<pid>/comm has it: at most 15 bytes), or 0.
func childOf(ppid int, comm string) int {
	if len(comm) > 15 {
		comm = comm[:15]
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || parentOf(pid) != ppid {
			continue
		}
		c, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err == nil && strings.TrimSpace(string(c)) == comm {
			return pid
		}
	}
	return 0
}

// peakRSSKB reads VmHWM (peak resident set size, kB) of pid.
func peakRSSKB(pid int) (int, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return kb, err == nil
		}
	}
	return 0, false
}
