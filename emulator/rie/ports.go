package rie

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// listenerOwner says whether the process pid (or one of its threads) holds
// the TCP socket listening on 127.0.0.1:port, reading Linux's /proc.
// known is false where /proc cannot tell (another OS, no /proc/net/tcp).
//
// Ports are chosen free (standin.FreePort) and then bound by
// aws-lambda-rie, a separate process: between the two another process —
// another make local's or another test's emulator — can bind the same
// port. The invoke address then answers, but for the other process's
// function, and every invocation this run sends goes there. Asking the
// kernel whose socket it is closes that gap.
func listenerOwner(pid, port int) (owned, known bool) {
	inode, ok := listeningInode("/proc/net/tcp", port)
	if !ok {
		if _, err := os.Stat("/proc/net/tcp"); err != nil {
			return false, false
		}
		return false, true // nothing listens on 127.0.0.1:port
	}
	fds, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "fd"))
	if err != nil {
		return false, false
	}
	want := fmt.Sprintf("socket:[%s]", inode)
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "fd", fd.Name())); err == nil && target == want {
			return true, true
		}
	}
	return false, true
}

// listeningInode finds the inode of the socket in state LISTEN on
// 127.0.0.1:port (or 0.0.0.0:port) in a /proc/net/tcp table.
func listeningInode(table string, port int) (string, bool) {
	f, err := os.Open(table)
	if err != nil {
		return "", false
	}
	defer f.Close()
	loopback := fmt.Sprintf("0100007F:%04X", port)
	wildcard := fmt.Sprintf("00000000:%04X", port)
	sc := bufio.NewScanner(f)
	sc.Scan() // the header line
	for sc.Scan() {
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[3] != "0A" { // 0A: TCP_LISTEN
			continue
		}
		if fields[1] == loopback || fields[1] == wildcard {
			return fields[9], true
		}
	}
	return "", false
}
