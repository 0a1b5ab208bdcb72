//go:build !linux

package bench

// hostCPU: the host's busy CPU time is read on Linux only.
func hostCPU() (busy, load float64, ok bool) { return 0, 0, false }

// clientCPU: read on Linux only.
func clientCPU() float64 { return 0 }

// daemonCPU: read on Linux only.
func daemonCPU() (float64, bool) { return 0, false }
