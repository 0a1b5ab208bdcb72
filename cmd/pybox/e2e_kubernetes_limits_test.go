//go:build !windows

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/pybox-dev/pybox/internal/contract"
	"github.com/pybox-dev/pybox/internal/testenv"
)

// podLimitsProbe is one program, run as a pod, that tries each limit of
// the container contract a pod does not get from the node: it prints one
// line per check ("name ok" or "name BROKEN detail").
const podLimitsProbe = `
import os, errno, resource
def check(name, ok, detail=""):
    print(name, "ok" if ok else "BROKEN " + str(detail))
# The kubelet's termination-message file: on the node's disk, mode 0666.
wrote = 0
for p in ("/dev/termination-log", "/root/.termination-log"):
    try:
        with open(p, "ab") as f:
            for _ in range(64):
                wrote += f.write(b"x" * (1 << 20))
    except OSError:
        pass
check("termination-log", wrote == 0, "%d bytes written" % wrote)
# File size: past fsize, a write fails (EFBIG; SIGXFSZ is ignored here).
import signal
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
err = None
try:
    with open("/tmp/big", "wb") as f:
        f.seek(soft)
        f.write(b"x")
except OSError as e:
    err = e.errno
check("fsize", hard == soft == 256 << 20 and err == errno.EFBIG, (soft, err))
check("nofile", resource.getrlimit(resource.RLIMIT_NOFILE) == (1024, 1024), resource.getrlimit(resource.RLIMIT_NOFILE))
k8s = sorted(k for k in os.environ if k.startswith("KUBERNETES"))
check("environment", not k8s and "PYBOX_RLIMITS" not in os.environ, k8s)
# Processes: forking past nproc fails (last: under gVisor, which does not
# enforce RLIMIT_NPROC, the loop ends at the pod's memory limit).
nproc = resource.getrlimit(resource.RLIMIT_NPROC)[0]
kids, err = [], None
try:
    for _ in range(1000):
        pid = os.fork()
        if pid == 0:
            signal.pause()
            os._exit(0)
        kids.append(pid)
except OSError as e:
    err = e.errno
for pid in kids:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
check("nproc", 0 < nproc <= 1000 and err == errno.EAGAIN and len(kids) < nproc, (nproc, len(kids), err))
`

// TestKubernetesPodLimits drives the real binary against a real node with
// hostile programs (issue 24): every limit of the container contract holds
// in a pod by construction, whatever the node's settings. A program writes
// nothing into the kubelet's termination-message file, cannot write a file
// past the file-size limit nor fork past the process limit, sees no
// KUBERNETES_* variable, and a session writing past its workspace gets
// ENOSPC, not an eviction later.
//
// On the same node, it runs the limits under runc and under gVisor
// (PYBOX_RUNTIME=runsc: RuntimeClass runsc, whose pods must show gVisor),
// the isolation battery (kubeBattery) under both, and checks that pybox
// refuses to start when the RuntimeClass it would name does not exist.
func TestKubernetesPodLimits(t *testing.T) {
	k := kubeTestOwn(t)
	kubeconfig, image, cs := k.kubeconfig, k.image, k.cs
	refusedOnTestNode(t, kubeconfig, image)
	env := []string{"PYBOX_BACKEND=kubernetes", "KUBECONFIG=" + kubeconfig, k8sAccept, "PYBOX_IMAGE=" + image}
	refusedWithoutRuntimeClass(t, env)
	eachKubeRuntime(t, cs, env, func(t *testing.T) {
		t.Run("pod limits", func(t *testing.T) { podLimits(t, cs) })
		if serverRuntime(t) == "" { // gVisor does not enforce RLIMIT_NPROC: its pods have no per-uid budget to share
			t.Run("fork flood beside another server", func(t *testing.T) { forkFloodBesideAnother(t, cs) })
		}
		for name, attack := range kubeBattery {
			t.Run(name, attack)
		}
	})
}

// podLimits is TestKubernetesPodLimits's limits under one runtime.
func podLimits(t *testing.T, cs kubernetes.Interface) {
	s := startServer(t, "PYBOX_WARM_POOL=0", "PYBOX_WORKSPACE_QUOTA=64m")
	log := s.stderr.String()
	if serverRuntime(t) == testenv.RunscClass && strings.Contains(log, "the start checks could not run") {
		t.Log("the start checks' probe pods did not answer under gVisor (a finding: the server waited their bound, then served as PYBOX_K8S_ACCEPT_UNENFORCED allows)")
	} else if !strings.Contains(log, "start checks") || !strings.Contains(log, "networkpolicy_enforced=false") {
		t.Errorf("the server's log does not say what the start checks found:\n%s", log)
	}
	if serverRuntime(t) == testenv.RunscClass {
		out, _ := s.exec(map[string]any{"code": "print(open('/proc/version').read())", "timeout_s": 120})
		if !strings.Contains(out.Stdout, "gvisor") {
			t.Fatalf("a pod of RuntimeClass runsc does not run under gVisor: /proc/version %+v", out)
		}
	}
	out, _ := s.exec(map[string]any{"code": podLimitsProbe, "timeout_s": 120})
	gvisorForkBomb := serverRuntime(t) == testenv.RunscClass && out.OOMKilled && !strings.Contains(out.Stdout, "nproc")
	if gvisorForkBomb {
		t.Log("gVisor does not enforce RLIMIT_NPROC: the fork loop ended at the pod's memory limit (OOM), contained")
	}
	if ok := strings.Count(out.Stdout, " ok\n"); (out.ExitCode != 0 || ok != 5) && !(gvisorForkBomb && ok == 4) {
		t.Errorf("limits in a pod: %+v", out)
	}
	// Output past the cap is dropped in the pod: its log (on the node's
	// disk) stays small while the program prints 64 MiB.
	ctx := t.Context()
	flood := make(chan struct{})
	go func() {
		defer close(flood)
		s.cs.CallTool(ctx, callParams("execute_code", map[string]any{"timeout_s": 20, "code": "import sys, time\nfor _ in range(64):\n    sys.stdout.write('x' * (1 << 20))\nsys.stdout.flush()\nsys.stderr.write('flooded-mark\\n')\nsys.stderr.flush()\ntime.sleep(60)"}))
	}()
	if n := podLogBytes(t, cs, "flooded-mark"); n > 8<<20 {
		t.Errorf("the pod's log holds %d bytes after 64 MiB printed past the cap", n)
	} else {
		t.Logf("pod log after 64 MiB printed: %d bytes", n)
	}
	<-flood
	// A session's workspace is a sized tmpfs: past 64 MiB, ENOSPC at once.
	start := time.Now()
	out, _ = s.exec(map[string]any{"session_id": "w", "timeout_s": 120, "code": `
import errno
n = 0
try:
    with open("/workspace/fill", "wb") as f:
        for _ in range(256):
            n += f.write(b"x" * (1 << 20))
            f.flush()
except OSError as e:
    print("errno", errno.errorcode[e.errno], n >> 20)
`})
	if !strings.HasPrefix(out.Stdout, "errno ENOSPC ") {
		t.Errorf("a session writing 256 MiB into a 64 MiB workspace: %+v", out)
	}
	out, _ = s.exec(map[string]any{"session_id": "w", "timeout_s": 60, "code": "import os\nos.remove('/workspace/fill')\nprint('alive')"})
	if out.Stdout != "alive\n" {
		t.Errorf("the session after ENOSPC: %+v", out)
	}
	t.Logf("workspace flood and the next call: %v", time.Since(start))
}

// forkFlood forks until the process limit refuses (at most 1000), keeps
// its children, says how far it got and waits.
const forkFlood = `
import os, signal, sys, time
n = 0
try:
    for _ in range(1000):
        if os.fork() == 0:
            signal.pause()
            os._exit(0)
        n += 1
except OSError as e:
    pass
sys.stderr.write("fork-flood-full %d uid %d\n" % (n, os.getuid()))
sys.stderr.flush()
time.sleep(600)
`

// forkFloodBesideAnother: a run that forks up to its process limit, and
// keeps its processes, does not stop another server's run on the same node
// from starting (issue 24). RLIMIT_NPROC counts a uid's processes across
// the whole node: with every pod as uid 10001, one tenant's flood left
// the other's runners unable to fork (a cross-tenant denial of service).
// Each pod runs as a uid of its own, so the budget is each pod's alone.
func forkFloodBesideAnother(t *testing.T, cs kubernetes.Interface) {
	a := startServer(t, "PYBOX_WARM_POOL=0")
	b := startServer(t, "PYBOX_WARM_POOL=0")
	ctx, cancel := context.WithCancel(t.Context())
	flood := make(chan struct{})
	go func() {
		defer close(flood)
		a.cs.CallTool(ctx, callParams("execute_code", map[string]any{"timeout_s": 300, "code": forkFlood}))
	}()
	defer func() { cancel(); <-flood }()
	var floodUID int
	wait, stop := context.WithTimeout(t.Context(), 2*time.Minute)
	defer stop()
	if !testenv.WaitFor(wait, func() bool {
		pods, err := cs.CoreV1().Pods(sandboxNS).List(wait, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, p := range pods.Items {
			raw, err := cs.CoreV1().Pods(sandboxNS).GetLogs(p.Name, &corev1.PodLogOptions{LimitBytes: ptrTo(int64(1 << 20))}).DoRaw(wait)
			if _, rest, ok := strings.Cut(string(raw), "fork-flood-full "); err == nil && ok {
				var n int
				_, err = fmt.Sscanf(rest, "%d uid %d", &n, &floodUID)
				t.Logf("the flood forked %d processes as uid %d", n, floodUID)
				return err == nil
			}
		}
		return false
	}) {
		t.Fatal("the fork flood did not report that it was full")
	}
	out, res := b.exec(map[string]any{"code": "import os, subprocess\nprint(subprocess.run(['true']).returncode, os.getuid())", "timeout_s": 120})
	var code, uid int
	if _, err := fmt.Sscanf(out.Stdout, "%d %d", &code, &uid); err != nil || res.IsError || code != 0 {
		t.Fatalf("another server's run beside a fork flood (uid %d): %+v %s", floodUID, out, text(res))
	}
	if uid == floodUID || !ownUID(uid) || !ownUID(floodUID) {
		t.Errorf("the run's uid %d, the flood's %d: want each its own, from %d on", uid, floodUID, contract.SandboxUIDBase)
	}
}

// ownUID reports whether uid is in the range of the sandboxes' own uids.
func ownUID(uid int) bool {
	return uid >= contract.SandboxUIDBase && uid < contract.SandboxUIDBase+contract.SandboxUIDCount
}

// k8sAccept lets pybox serve on the test node, whose bridge CNI enforces
// no NetworkPolicy and whose kubelet sets no podPidsLimit.
const k8sAccept = "PYBOX_K8S_ACCEPT_UNENFORCED=networkpolicy,pids"

// refusedOnTestNode: without k8sAccept, pybox refuses to start on the test
// node, with an error naming the setting, and its log says what the start
// checks found; accepting one check only is still refused for the other.
func refusedOnTestNode(t *testing.T, kubeconfig, image string) {
	for _, accept := range []string{"", "networkpolicy"} {
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
		cmd := exec.CommandContext(ctx, pyboxBin, "serve")
		cmd.Env = append(os.Environ(), "PYBOX_BACKEND=kubernetes", "KUBECONFIG="+kubeconfig, "PYBOX_IMAGE="+image, "PYBOX_BUILD=never",
			"PYBOX_WARM_POOL=0", "CODE_STORAGE_DIR="+t.TempDir(), "PYBOX_STATE_DIR="+t.TempDir(), "PYBOX_K8S_ACCEPT_UNENFORCED="+accept)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		cancel()
		want := "PYBOX_K8S_ACCEPT_UNENFORCED=networkpolicy,pids"
		if accept != "" {
			want = "PYBOX_K8S_ACCEPT_UNENFORCED=pids"
		}
		if err == nil || !strings.Contains(string(out), want) || !strings.Contains(string(out), "networkpolicy_enforced=false") {
			t.Errorf("pybox serve on the test node accepting %q: %v after %v; want a refusal naming %s and the log of the checks:\n%s", accept, err, time.Since(start), want, out)
		}
		_, refusal, _ := strings.Cut(string(out), "refusing")
		refusal, _, _ = strings.Cut(refusal, "\n")
		t.Logf("refused (accepting %q) in %v: refusing%s", accept, time.Since(start).Round(time.Millisecond), refusal)
	}
}

// kubeCluster is a Kubernetes test cluster: a control plane and a node
// (kubeTest, kubeTestOwn), with cmd/pybox/kubernetes's namespaces and RBAC
// applied.
type kubeCluster struct {
	cp         *testenv.ControlPlane
	node       *testenv.Node
	cs         kubernetes.Interface // the admin's
	kubeconfig string               // pybox's account, for the sandboxes' namespace
	ns         string               // the sandboxes' namespace
	image      string               // the runtime image, imported into the node
	stop       func()               // stops the node and the control plane, removes their folder
}

var (
	kubeOnce   sync.Once
	kubeShared *kubeCluster
	kubeErr    error
	// kubeTurn lets one test at a time use the shared cluster: each checks
	// the sandboxes' namespace (no pod left, the pods' logs) as its own.
	kubeTurn = make(chan struct{}, 1)
)

// stopKube stops the shared cluster, if one started, once the package's
// tests are done (TestMain).
func stopKube() {
	if kubeShared != nil {
		kubeShared.stop()
	}
}

// kubeTest marks t as a Kubernetes end-to-end test and returns the shared
// cluster, started by the first such test. Starting a control plane and a
// node (etcd, kube-apiserver, containerd with the runtime image imported,
// kubelet, scheduler) costs ~25 s of CPU; the short tests need nothing of
// their own from it, so they take turns on one. TestKubernetesPodLimits,
// minutes long, has its own (kubeTestOwn) and runs beside them: behind it
// in the turns, they made a chain as long as the package. A long test
// otherwise (its slot taken once its turn has come, so that waiting holds
// none): skipped where no node can run, unless PYBOX_REQUIRE_K8S is set.
func kubeTest(t *testing.T) *kubeCluster {
	bin, image := kubeReady(t)
	kubeTurn <- struct{}{}
	t.Cleanup(func() { <-kubeTurn })
	longSlots <- struct{}{}
	t.Cleanup(func() { <-longSlots })
	kubeOnce.Do(func() { kubeShared, kubeErr = startKube(bin, image) })
	if kubeErr != nil {
		t.Fatal(kubeErr)
	}
	kubeLogs(t, kubeShared)
	return kubeShared
}

// kubeTestOwn is kubeTest with a cluster of t's own, stopped at its end.
func kubeTestOwn(t *testing.T) *kubeCluster {
	bin, image := kubeReady(t)
	longSlots <- struct{}{}
	t.Cleanup(func() { <-longSlots })
	k, err := startKube(bin, image)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.stop)
	kubeLogs(t, k)
	return k
}

// kubeReady makes t parallel and returns the Kubernetes binaries and the
// runtime image, or skips t where no node can run.
func kubeReady(t *testing.T) (bin, image string) {
	t.Parallel()
	bin = testenv.KubeBin(t)
	if why := testenv.KubeNodeReady(bin); why != "" {
		if os.Getenv("PYBOX_REQUIRE_K8S") != "" {
			t.Fatalf("PYBOX_REQUIRE_K8S is set but no node can run here: %s", why)
		}
		t.Skip(why)
	}
	return bin, testenv.RuntimeImage(t, testenv.Docker(t), "base")
}

// kubeLogs logs k's node's logs when t fails.
func kubeLogs(t *testing.T, k *kubeCluster) {
	t.Cleanup(func() {
		if t.Failed() {
			for _, l := range []string{"kubelet", "scheduler", "containerd"} {
				t.Logf("%s log:\n%s", l, k.node.Log(l))
			}
		}
	})
}

// startKube starts a cluster; on an error, what it started is stopped.
func startKube(bin, image string) (*kubeCluster, error) {
	dir, err := os.MkdirTemp("", "pybox-e2e-k8s-")
	if err != nil {
		return nil, err
	}
	cp, err := testenv.StartControlPlane(bin, dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	node, err := testenv.StartNode(cp, bin, image)
	if err != nil {
		cp.Stop()
		os.RemoveAll(dir)
		return nil, err
	}
	k := &kubeCluster{cp: cp, node: node, cs: kubernetes.NewForConfigOrDie(cp.Admin), image: image,
		stop: func() { node.Stop(); cp.Stop(); os.RemoveAll(dir) }}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if k.kubeconfig, k.ns, err = testenv.SandboxKubeconfig(ctx, cp, "kubernetes"); err != nil {
		k.stop()
		return nil, err
	}
	return k, nil
}

// podLogBytes waits for the one running pod of the sandboxes' namespace whose
// log contains mark and returns the size of that log (read up to 16 MiB).
func podLogBytes(t *testing.T, cs kubernetes.Interface, mark string) int {
	var size int
	wait, stop := context.WithTimeout(t.Context(), 90*time.Second)
	defer stop()
	found := testenv.WaitFor(wait, func() bool {
		pods, err := cs.CoreV1().Pods(sandboxNS).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, p := range pods.Items {
			raw, err := cs.CoreV1().Pods(sandboxNS).GetLogs(p.Name, &corev1.PodLogOptions{LimitBytes: ptrTo(int64(16 << 20))}).DoRaw(t.Context())
			if err == nil && strings.Contains(string(raw), mark) {
				size = len(raw)
				return true
			}
		}
		return false
	})
	if !found {
		t.Errorf("no pod's log shows %q", mark)
	}
	return size
}

// sandboxNS is the sandboxes' namespace of cmd/pybox/kubernetes/namespace.yaml.
const sandboxNS = "pybox-sandboxes"

func ptrTo[T any](v T) *T { return &v }
