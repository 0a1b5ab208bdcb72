package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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
// registry); the pause image is written from $PYBOX_K8S_BIN/pause. It needs
// root, and the recipe in ../shared/reference/kubernetes.md. Everything it
// makes on the host is named for it alone (nodeNames), so nodes coexist.
type Node struct {
	cp    *ControlPlane
	dir   string
	sock  string
	procs []proc
	names nodeNames
	// Runsc: pods of RuntimeClass RunscClass run under gVisor through
	// containerd's runsc shim (the node found containerd-shim-runsc-v1 and
	// runsc on PATH).
	Runsc bool
}

// NodeName is the node's name (the kubelet's --hostname-override): the API
// server reaches it as localhost (--kubelet-preferred-address-types=Hostname).
const NodeName = "localhost"

// RunscClass is the RuntimeClass (handler runsc: gVisor) a node with
// Runsc has: pybox with PYBOX_RUNTIME=runsc names it as its pods'
// runtimeClassName.
const RunscClass = "runsc"

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

// runscShimReady says whether gVisor's containerd shim and runsc are on PATH.
func runscShimReady() bool {
	for _, b := range []string{"containerd-shim-runsc-v1", "runsc"} {
		if _, err := exec.LookPath(b); err != nil {
			return false
		}
	}
	return true
}

// StartNode starts a node for cp, imports images (local Docker tags) into
// its containerd, and waits until the node is Ready. Stop removes
// everything it made on the host (mounts, the pods' network namespaces,
// which containerd mounts in its state folder there, bridge, cgroups, processes).
func StartNode(cp *ControlPlane, bin string, images ...string) (*Node, error) {
	names, err := newNodeNames()
	if err != nil {
		return nil, err
	}
	n := &Node{cp: cp, dir: filepath.Join(cp.Dir, "node"), names: names, Runsc: runscShimReady()}
	ok := false
	defer func() {
		if !ok {
			n.Stop()
		}
	}()
	if err := n.writeConfigs(); err != nil {
		return nil, err
	}
	if err := makeCgroupRoot(n.names.cgroupRoot); err != nil {
		return nil, err
	}
	if err := n.start("containerd", "containerd.log", "--config", n.path("ctrd/config.toml")); err != nil {
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
	if err := n.startKubernetes(bin); err != nil {
		return nil, err
	}
	if err := n.waitReady(120 * time.Second); err != nil {
		return nil, err
	}
	if n.Runsc {
		if err := n.addRuntimeClass(); err != nil {
			return nil, err
		}
	}
	ok = true
	return n, nil
}

func (n *Node) path(p string) string { return filepath.Join(n.dir, p) }

// startKubernetes starts the scheduler and the kubelet, each on ports
// free a moment ago.
func (n *Node) startKubernetes(bin string) error {
	kubeconfig, err := n.cp.Kubeconfig("node", "admin-token", "default")
	if err != nil {
		return err
	}
	if err := n.startListening(filepath.Join(bin, "kube-scheduler"), "scheduler.log", 1, func(ports []int) ([]string, error) {
		return []string{"--kubeconfig=" + kubeconfig, "--authentication-kubeconfig=" + kubeconfig, "--authorization-kubeconfig=" + kubeconfig,
			"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", ports[0]), "--leader-elect=false"}, nil
	}); err != nil {
		return err
	}
	return n.startListening(filepath.Join(bin, "kubelet"), "kubelet.log", 2, func(ports []int) ([]string, error) {
		if err := os.WriteFile(n.path("kubelet/config.yaml"), []byte(n.kubeletConfig(ports[0], ports[1])), 0o644); err != nil {
			return nil, err
		}
		args := []string{"--config=" + n.path("kubelet/config.yaml"), "--kubeconfig=" + kubeconfig,
			"--root-dir=" + n.path("kubelet/root"), "--cert-dir=" + n.path("kubelet/pki"), "--hostname-override=" + NodeName}
		if v := os.Getenv("PYBOX_K8S_KUBELET_V"); v != "" {
			args = append(args, "-v="+v) // 3 logs the steps KubeletSteps reads
		}
		return args, nil
	})
}

// startListening starts bin with the arguments args gives for nports
// ports free a moment ago (the first: the one it serves on), and waits
// until it accepts connections there. A port free when drawn may be taken
// before bin binds it (by another test process's node, whose draws this
// process does not see): bin then exits ("address already in use"), and is
// started again on other ports, a few times.
func (n *Node) startListening(bin, logName string, nports int, args func(ports []int) ([]string, error)) error {
	for try := 1; ; try++ {
		ports, err := freePorts(nports)
		if err != nil {
			return err
		}
		a, err := args(ports)
		if err != nil {
			return err
		}
		p, err := startProc(n.dir, bin, logName, a...)
		if err != nil {
			return err
		}
		listening, exited := waitListening(p, ports[0], 2*time.Minute)
		if listening {
			n.procs = append(n.procs, p)
			return nil
		}
		if !exited {
			stopProcs([]proc{p})
		}
		log := tail(filepath.Join(n.dir, logName), 3000)
		if exited && try < 4 && strings.Contains(log, "address already in use") {
			continue
		}
		return fmt.Errorf("%s did not listen on 127.0.0.1:%d (exited: %v); its log ends:\n%s", filepath.Base(bin), ports[0], exited, log)
	}
}

// waitListening waits, up to limit, until 127.0.0.1:port accepts a
// connection or p exits (polling the port: nothing tells when it binds).
func waitListening(p proc, port int, limit time.Duration) (listening, exited bool) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	WaitFor(ctx, func() bool {
		select {
		case <-p.done:
			exited = true
			return true
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			listening = true
		}
		return listening
	})
	return listening, exited
}

func (n *Node) start(bin, logName string, args ...string) error {
	p, err := startProc(n.dir, bin, logName, args...)
	if err == nil {
		n.procs = append(n.procs, p)
	}
	return err
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
