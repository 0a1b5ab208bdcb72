package bench

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// hostCPU is the CPU time the host's processors have spent busy since
// boot (user, nice, system, irq, softirq, steal: /proc/stat), in seconds,
// and the 1-minute load average; ok is false where they cannot be read.
func hostCPU() (busy, load float64, ok bool) {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := strings.Cut(string(stat), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, false
	}
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system (idle iowait) irq softirq steal
		n, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return 0, 0, false
		}
		busy += n / 100 // USER_HZ: /proc/stat counts hundredths of a second
	}
	avg, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, 0, false
	}
	load, err = strconv.ParseFloat(strings.Fields(string(avg) + " x")[0], 64)
	return busy, load, err == nil
}

// clientCPU is the CPU time this process and its children that ended
// (pybox eval, docker) have used, in seconds.
func clientCPU() float64 {
	var self, children syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &self) != nil || syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children) != nil {
		return 0
	}
	sec := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return sec(self.Utime) + sec(self.Stime) + sec(children.Utime) + sec(children.Stime)
}
