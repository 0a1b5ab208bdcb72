package testenv

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// nodeNames are what a node makes on the host, each unique to it, so that
// nodes of two test runs (or two nodes of one) coexist: the pod bridge,
// the cgroup tree the kubelet puts pods under, the CNI network (whose IP
// allocations host-local keeps by name) and its subnet.
type nodeNames struct {
	id         string // 8 hex digits, random
	bridge     string // pbk<id>: 11 characters, under IFNAMSIZ
	cgroupRoot string // /pybox-k8s-<id>; the kubelet adds kubepods below it
	network    string
	subnet     string // a /24 in 10.244.0.0/16 no interface here uses
}

func newNodeNames() (nodeNames, error) {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return nodeNames{}, err
	}
	id := hex.EncodeToString(b)
	subnet, err := freeSubnet(b[0])
	if err != nil {
		return nodeNames{}, err
	}
	return nodeNames{id: id, bridge: "pbk" + id, cgroupRoot: "/pybox-k8s-" + id, network: "pybox-" + id, subnet: subnet}, nil
}

// freeSubnet picks a 10.244.X.0/24, from X = start on, that no interface
// on the host has an address in.
func freeSubnet(start byte) (string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", err
	}
	for i := range 256 {
		_, cidr, _ := net.ParseCIDR(fmt.Sprintf("10.244.%d.0/24", (int(start)+i)%256))
		if !slices.ContainsFunc(addrs, func(a net.Addr) bool {
			ip, _, err := net.ParseCIDR(a.String())
			return err == nil && cidr.Contains(ip)
		}) {
			return cidr.String(), nil
		}
	}
	return "", fmt.Errorf("no free /24 in 10.244.0.0/16")
}

// cgroupMounts are the cgroup hierarchies: the v1 controllers' folders
// under /sys/fs/cgroup (and the hybrid unified one), or the v2 root.
func cgroupMounts() []string {
	var roots []string
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.procs"); err == nil {
		roots = append(roots, "/sys/fs/cgroup")
	}
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range entries {
		p := filepath.Join("/sys/fs/cgroup", e.Name())
		if _, err := os.Stat(filepath.Join(p, "cgroup.procs")); err == nil && e.IsDir() {
			roots = append(roots, p)
		}
	}
	return roots
}

// makeCgroupRoot creates the node's cgroup root in every hierarchy (the
// kubelet requires it to exist); a new cpuset gets its parent's CPUs and
// memory nodes, without which no task may join it.
func makeCgroupRoot(root string) error {
	for _, m := range cgroupMounts() {
		dir := filepath.Join(m, root)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("cgroup root: %w", err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if b, err := os.ReadFile(filepath.Join(m, f)); err == nil {
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
					return fmt.Errorf("cgroup root %s: %w", f, err)
				}
			}
		}
	}
	return nil
}

// Stop ends the node's processes and what they made on the host: its
// pods' shims and processes, the kubelet's mounts, its bridge, its
// cgroups. It touches nothing of another node's.
func (n *Node) Stop() {
	stopProcs(n.procs)
	n.procs = nil
	// The shims of this containerd (and their pods' processes) outlive it;
	// each names this node's containerd socket, under n.dir.
	if out, err := exec.Command("pgrep", "-f", "containerd-shim.*"+n.dir).Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil {
				killPid(pid)
			}
		}
	}
	if n.names.cgroupRoot != "" {
		// So do the pods' processes (pause, runners, gVisor's sandboxes) when
		// the kubelet had no time to tear their sandboxes down: every process
		// in this node's cgroup tree goes, then the tree.
		for _, m := range cgroupMounts() {
			killCgroups(filepath.Join(m, n.names.cgroupRoot))
		}
		waitCgroupsEmpty(n.names.cgroupRoot, 10*time.Second)
		for _, m := range cgroupMounts() {
			removeCgroups(filepath.Join(m, n.names.cgroupRoot))
		}
	}
	unmountUnder(n.dir)
	if n.names.bridge != "" {
		_ = exec.Command("ip", "link", "delete", n.names.bridge).Run()
	}
}

// killCgroups SIGKILLs every process in a cgroup tree.
func killCgroups(dir string) {
	for _, pid := range cgroupPids(dir) {
		killPid(pid)
	}
}

// cgroupPids lists the processes in a cgroup tree.
func cgroupPids(dir string) []int {
	var pids []int
	_ = filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() || e.Name() != "cgroup.procs" {
			return nil
		}
		b, _ := os.ReadFile(p)
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// waitCgroupsEmpty waits, bounded, until the killed have left root's trees.
func waitCgroupsEmpty(root string, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		busy := false
		for _, m := range cgroupMounts() {
			busy = busy || len(cgroupPids(filepath.Join(m, root))) > 0
		}
		if !busy {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// unmountUnder unmounts every mount below dir, deepest first.
func unmountUnder(dir string) {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return
	}
	defer f.Close()
	var mounts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 1 && strings.HasPrefix(fields[1], dir) {
			mounts = append(mounts, fields[1])
		}
	}
	slices.SortFunc(mounts, func(a, b string) int { return len(b) - len(a) })
	for _, m := range mounts {
		unmount(m)
	}
}

// removeCgroups removes a cgroup tree, leaves first (best effort).
func removeCgroups(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() {
			removeCgroups(filepath.Join(dir, e.Name()))
		}
	}
	_ = os.Remove(dir) // an empty cgroup folder: rmdir
}

func waitPath(p string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(p); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s did not appear within %v", p, limit)
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
