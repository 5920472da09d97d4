//go:build !linux

package main

import "time"

var start = time.Now()

// threadCPU is the time since the process started: without a thread CPU
// clock, the store's time is its wall time (the machine should be idle).
func threadCPU() time.Duration { return time.Since(start) }
