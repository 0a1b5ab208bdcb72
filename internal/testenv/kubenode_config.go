package testenv

import (
	"context"
	"fmt"
	"os"

	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// writeConfigs writes the node's containerd, CNI (and, with Runsc, gVisor
// shim) configurations: every folder, name and cgroup its own (the
// kubelet's, with its ports, is written as it starts: startKubernetes).
func (n *Node) writeConfigs() error {
	for _, p := range []string{"ctrd", "cni", "kubelet/root", "kubelet/pki", "pod-logs"} {
		if err := os.MkdirAll(n.path(p), 0o755); err != nil {
			return err
		}
	}
	n.sock = n.path("ctrd/containerd.sock")
	files := map[string]string{
		"ctrd/config.toml":      n.containerdConfig(),
		"ctrd/runsc.toml":       n.runscConfig(),
		"cni/10-pybox.conflist": n.cniConfig(),
	}
	for name, body := range files {
		if err := os.WriteFile(n.path(name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (n *Node) containerdConfig() string {
	runsc := ""
	if n.Runsc {
		runsc = fmt.Sprintf(`    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc]
      runtime_type = "io.containerd.runsc.v1"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc.options]
        TypeUrl = "io.containerd.runsc.v1.options"
        ConfigPath = %q
`, n.path("ctrd/runsc.toml"))
	}
	return fmt.Sprintf(`version = 2
root = %q
state = %q
[grpc]
  address = %q
[ttrpc]
  address = %q
[plugins."io.containerd.internal.v1.opt"]
  path = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %q
%s  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
`, n.path("ctrd/root"), n.path("ctrd/state"), n.sock, n.path("ctrd/ttrpc.sock"), n.path("ctrd/opt"),
		PauseImage, n.path("runc"), runsc, n.path("cni"))
}

// runscConfig is gVisor's shim's: runsc's state under the node's folder,
// and the embedded sentry the pinned runsc falls back to (see
// docs/security.md, gVisor).
func (n *Node) runscConfig() string {
	return fmt.Sprintf(`root = %q
[runsc_config]
  sidecar-usage-policy = "LEGACY_DEPRECATED_SLOW_EMBEDDED_FALLBACK"
`, n.path("runsc"))
}

// cniConfig: pods get a bridge with no gateway and no masquerading: they
// reach each other, never the host or beyond. host-local keeps its
// allocations under the node's folder.
func (n *Node) cniConfig() string {
	return fmt.Sprintf(`{"cniVersion": "0.4.0", "name": %q, "plugins": [
  {"type": "bridge", "bridge": %q, "isGateway": false, "ipMasq": false,
   "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": %q}]]}},
  {"type": "loopback"}]}`, n.names.network, n.names.bridge, n.path("cni/ipam"), n.names.subnet)
}

// kubeletConfig: its own ports, cgroup root and pod-log folder (a kubelet
// removes the log folders of pods its runtime does not know).
func (n *Node) kubeletConfig(port, healthz int) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: %d
healthzBindAddress: 127.0.0.1
healthzPort: %d
readOnlyPort: 0
cgroupRoot: %q
podLogsDir: %q
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
failSwapOn: false
failCgroupV1: false
containerRuntimeEndpoint: unix://%s
evictionHard: {memory.available: "1Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
imageGCHighThresholdPercent: 100
serializeImagePulls: false
`, port, healthz, n.names.cgroupRoot, n.path("pod-logs"), n.sock)
}

// addRuntimeClass creates RunscClass, whose pods the node's containerd
// runs with gVisor's shim.
func (n *Node) addRuntimeClass() error {
	cs, err := kubernetes.NewForConfig(n.cp.Admin)
	if err != nil {
		return err
	}
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: RunscClass}, Handler: "runsc"}
	if _, err := cs.NodeV1().RuntimeClasses().Create(context.Background(), rc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("RuntimeClass %s: %w", RunscClass, err)
	}
	return nil
}
