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

// daemonCPU is the CPU time, in seconds, of the Docker daemon's processes
// (dockerd and containerd) and of the containers' (the cgroup docker puts
// them under, which keeps what its removed containers used): what the
// daemon's clients made it spend, anyone's (other clients count too).
// The shims and runc, which exit and are reaped by init, are not in it.
// ok is false where either part cannot be read (cgroup v1 with the
// cgroupfs driver only).
func daemonCPU() (sec float64, ok bool) {
	usage, err := os.ReadFile("/sys/fs/cgroup/cpuacct/docker/cpuacct.usage")
	if err != nil {
		return 0, false
	}
	ns, err := strconv.ParseFloat(strings.TrimSpace(string(usage)), 64)
	if err != nil {
		return 0, false
	}
	sec = ns / 1e9
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	found := 0
	for _, p := range procs {
		comm, err := os.ReadFile("/proc/" + p.Name() + "/comm")
		if err != nil || (string(comm) != "dockerd\n" && string(comm) != "containerd\n") {
			continue
		}
		stat, err := os.ReadFile("/proc/" + p.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) < 13 {
			continue
		}
		for _, v := range f[11:13] { // utime, stime (fields 14 and 15)
			n, _ := strconv.ParseFloat(v, 64)
			sec += n / 100
		}
		found++
	}
	return sec, found > 0
}
