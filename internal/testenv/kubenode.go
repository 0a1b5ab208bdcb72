package testenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Node is a real Kubernetes node beside a ControlPlane: a containerd of its
// own with the CRI plugin (dockerd's stays untouched), a bridge CNI, the
// kubelet and the scheduler. Images come from the local Docker daemon (no
// registry): the pause image is built from $PYBOX_K8S_BIN/pause. It needs
// root, and the recipe in ../shared/reference/kubernetes.md.
type Node struct {
	cp     *ControlPlane
	dir    string
	sock   string
	procs  []proc
	bridge string
}

// NodeName is the node's name (the kubelet's --hostname-override): the API
// server reaches it as localhost (--kubelet-preferred-address-types=Hostname).
const NodeName = "localhost"

// KubeNodeReady says why a node cannot run here, or "".
func KubeNodeReady(bin string) string {
	if os.Geteuid() != 0 {
		return "a node needs root"
	}
	for _, b := range []string{filepath.Join(bin, "kubelet"), filepath.Join(bin, "kube-scheduler"), filepath.Join(bin, "pause"), "/usr/lib/cni/bridge", "/usr/lib/cni/host-local", "/usr/lib/cni/loopback"} {
		if _, err := os.Stat(b); err != nil {
			return "missing " + b
		}
	}
	for _, b := range []string{"containerd", "ctr", "docker"} {
		if _, err := exec.LookPath(b); err != nil {
			return "missing " + b
		}
	}
	return ""
}

// StartNode starts a node for cp, imports images (local Docker tags) into
// its containerd, and waits until the node is Ready. Stop removes
// everything it made on the host (mounts, the pods' network namespaces,
// which containerd mounts in its state folder there, bridge, cgroups, processes).
func StartNode(cp *ControlPlane, bin string, images ...string) (*Node, error) {
	n := &Node{cp: cp, dir: filepath.Join(cp.Dir, "node"), bridge: "pyboxk8s0"}
	ok := false
	defer func() {
		if !ok {
			n.Stop()
		}
	}()
	d := func(p string) string { return filepath.Join(n.dir, p) }
	for _, p := range []string{"ctrd", "cni", "kubelet/root", "kubelet/pki"} {
		if err := os.MkdirAll(d(p), 0o755); err != nil {
			return nil, err
		}
	}
	n.sock = d("ctrd/containerd.sock")
	ctrd := fmt.Sprintf(`version = 2
root = %q
state = %q
[grpc]
  address = %q
[ttrpc]
  address = %q
[plugins."io.containerd.internal.v1.opt"]
  path = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "k8s.local/pause:1"
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
`, d("ctrd/root"), d("ctrd/state"), n.sock, d("ctrd/ttrpc.sock"), d("ctrd/opt"), d("cni"))
	// Pods get a bridge with no gateway and no masquerading: they reach each
	// other, never the host or beyond.
	cni := fmt.Sprintf(`{"cniVersion": "0.4.0", "name": "pybox-test", "plugins": [
  {"type": "bridge", "bridge": %q, "isGateway": false, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.0.0/24"}]]}},
  {"type": "loopback"}]}`, n.bridge)
	kubeconfig, err := cp.Kubeconfig("node", "admin-token", "default")
	if err != nil {
		return nil, err
	}
	kubelet := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
failSwapOn: false
failCgroupV1: false
containerRuntimeEndpoint: unix://%s
evictionHard: {memory.available: "1Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
imageGCHighThresholdPercent: 100
serializeImagePulls: false
`, n.sock)
	for name, body := range map[string]string{"ctrd/config.toml": ctrd, "cni/10-pybox.conflist": cni, "kubelet/config.yaml": kubelet} {
		if err := os.WriteFile(d(name), []byte(body), 0o644); err != nil {
			return nil, err
		}
	}
	if err := n.start("containerd", "containerd.log", "--config", d("ctrd/config.toml")); err != nil {
		return nil, err
	}
	if err := waitPath(n.sock, 30*time.Second); err != nil {
		return nil, fmt.Errorf("containerd: %w", err)
	}
	if err := n.importPause(bin); err != nil {
		return nil, err
	}
	for _, img := range images {
		if err := n.importImage(img); err != nil {
			return nil, err
		}
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	if err := n.start(filepath.Join(bin, "kube-scheduler"), "scheduler.log", "--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig, "--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", ports[0]), "--leader-elect=false"); err != nil {
		return nil, err
	}
	if err := n.start(filepath.Join(bin, "kubelet"), "kubelet.log", "--config="+d("kubelet/config.yaml"), "--kubeconfig="+kubeconfig,
		"--root-dir="+d("kubelet/root"), "--cert-dir="+d("kubelet/pki"), "--hostname-override="+NodeName); err != nil {
		return nil, err
	}
	if err := n.waitReady(120 * time.Second); err != nil {
		return nil, err
	}
	ok = true
	return n, nil
}

func (n *Node) start(bin, logName string, args ...string) error {
	p, err := startProc(n.dir, bin, logName, args...)
	if err == nil {
		n.procs = append(n.procs, p)
	}
	return err
}

// importPause builds the pause image from the static pause binary and
// imports it into the node's containerd.
func (n *Node) importPause(bin string) error {
	root := filepath.Join(n.dir, "pause-rootfs")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(bin, "pause"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, "pause"), b, 0o755); err != nil {
		return err
	}
	tar := exec.Command("tar", "-C", root, "-c", ".")
	imp := exec.Command("docker", "import", "--change", `ENTRYPOINT ["/pause"]`, "-", "k8s.local/pause:1")
	imp.Stdin, _ = tar.StdoutPipe()
	if err := tar.Start(); err != nil {
		return err
	}
	if out, err := imp.CombinedOutput(); err != nil {
		return fmt.Errorf("docker import pause: %v: %s", err, out)
	}
	if err := tar.Wait(); err != nil {
		return err
	}
	return n.importImage("k8s.local/pause:1")
}

// importImage copies a local Docker image into the node's containerd.
func (n *Node) importImage(tag string) error {
	save := exec.Command("docker", "save", tag)
	imp := exec.Command("ctr", "-a", n.sock, "-n", "k8s.io", "images", "import", "-")
	imp.Stdin, _ = save.StdoutPipe()
	var serr strings.Builder
	save.Stderr = &serr
	if err := save.Start(); err != nil {
		return err
	}
	out, err := imp.CombinedOutput()
	if werr := save.Wait(); werr != nil {
		return fmt.Errorf("docker save %s: %v: %s", tag, werr, serr.String())
	}
	if err != nil {
		return fmt.Errorf("ctr import %s: %v: %s", tag, err, out)
	}
	return nil
}

func (n *Node) waitReady(limit time.Duration) error {
	cs, err := kubernetes.NewForConfig(n.cp.Admin)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	ready := WaitFor(ctx, func() bool {
		node, err := cs.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	})
	if !ready {
		return fmt.Errorf("node not Ready within %v; kubelet log ends:\n%s", limit, tail(filepath.Join(n.dir, "kubelet.log"), 3000))
	}
	// The kubelet registers the node tainted not-ready; the controller
	// manager's node lifecycle controller, which does not run here, would
	// lift the taint once the node is Ready.
	for range 10 {
		node, err := cs.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(node.Spec.Taints) == 0 {
			return nil
		}
		node.Spec.Taints = nil
		if _, err = cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond) // a conflict with the kubelet's own update
	}
	return errors.New("could not lift the node's not-ready taint")
}

// Log returns the end of one of the node's logs (kubelet, containerd,
// scheduler), for failures.
func (n *Node) Log(name string) string { return tail(filepath.Join(n.dir, name+".log"), 4000) }

// Stop ends the node's processes and what they made on the host: the
// pods' shims and processes, the kubelet's mounts, the bridge, the cgroups.
func (n *Node) Stop() {
	stopProcs(n.procs)
	n.procs = nil
	// The shims of this containerd (and their pods' processes) outlive it.
	if out, err := exec.Command("pgrep", "-f", "containerd-shim.*"+n.dir).Output(); err == nil {
		for _, pid := range strings.Fields(string(out)) {
			_ = exec.Command("kill", "-9", pid).Run()
		}
	}
	// So do the pods' processes (pause, runners) when the kubelet had no
	// time to tear their sandboxes down: every process in its cgroups goes.
	for _, root := range cgroupRoots() {
		killCgroups(filepath.Join(root, "kubepods"))
	}
	time.Sleep(200 * time.Millisecond) // the killed leave their cgroups
	for _, root := range cgroupRoots() {
		removeCgroups(filepath.Join(root, "kubepods"))
	}
	unmountUnder(n.dir)
	_ = exec.Command("ip", "link", "delete", n.bridge).Run()
}

// killCgroups SIGKILLs every process in a cgroup tree.
func killCgroups(dir string) {
	_ = filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() || e.Name() != "cgroup.procs" {
			return nil
		}
		b, _ := os.ReadFile(p)
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
				killPid(pid)
			}
		}
		return nil
	})
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

// cgroupRoots are the cgroup v1 hierarchies (or the v2 root).
func cgroupRoots() []string {
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return nil
	}
	roots := []string{"/sys/fs/cgroup"}
	for _, e := range entries {
		if e.IsDir() {
			roots = append(roots, filepath.Join("/sys/fs/cgroup", e.Name()))
		}
	}
	return roots
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
