//go:build !windows

package main

import (
	"cmp"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pybox-dev/pybox/internal/contract"
	"github.com/pybox-dev/pybox/internal/testenv"
)

// TestKubernetesNode drives the real binary with PYBOX_BACKEND=kubernetes
// against a real control plane and a real node (containerd, CNI, kubelet,
// scheduler): execute_code, a session, a timeout and a cancelled call run
// end to end as pods, and no pod is left behind.
func TestKubernetesNode(t *testing.T) {
	kc := kubeTest(t)
	cs, ns, kubeconfig, image, node := kc.cs, kc.ns, kc.kubeconfig, kc.image, kc.node
	ctx := t.Context()
	pods := func() []corev1.Pod {
		list, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return list.Items
	}
	// After the server has exited (its cleanup runs first): no pod is left.
	t.Cleanup(func() {
		wait, stop := context.WithTimeout(context.Background(), 60*time.Second)
		defer stop()
		if !testenv.WaitFor(wait, func() bool { return len(pods()) == 0 }) {
			var names []string
			for _, p := range pods() {
				names = append(names, p.Name+" "+string(p.Status.Phase))
			}
			t.Errorf("pods left after the server exited: %v", names)
		}
		if t.Failed() {
			for _, p := range pods() {
				t.Logf("pod %s: %s %+v %+v", p.Name, p.Status.Phase, p.Status.Conditions, p.Status.ContainerStatuses)
			}
		}
	})

	s := startServer(t, "PYBOX_BACKEND=kubernetes", "KUBECONFIG="+kubeconfig, k8sAccept, "PYBOX_WARM_POOL=1", "PYBOX_IMAGE="+image)
	out, _ := s.exec(map[string]any{"code": "import os, socket\nprint(6 * 7, os.getcwd(), os.getuid(), os.getgid())\nprint(sorted(os.listdir('.')))", "timeout_s": 120})
	if out.ExitCode != 0 || !strings.HasPrefix(out.Stdout, "42 /workspace ") || !strings.Contains(out.Stdout, " 10001\n") {
		t.Fatalf("execute_code as a pod: %+v", out)
	}
	if uid, _ := strconv.Atoi(strings.Fields(out.Stdout)[2]); !ownUID(uid) {
		t.Errorf("a pod's uid %d: want one of its own, from %d on", uid, contract.SandboxUIDBase)
	}
	// Warm: the pool's pod answers.
	out, _ = s.exec(map[string]any{"code": "import sys\nprint('warm', file=sys.stderr)\nraise SystemExit(3)", "timeout_s": 60})
	if out.ExitCode != 3 || out.Stderr != "warm\n" {
		t.Errorf("second run: %+v", out)
	}
	// A session keeps its variables in its pod.
	s.exec(map[string]any{"code": "x = 41", "session_id": "k", "timeout_s": 120})
	out, _ = s.exec(map[string]any{"code": "x += 1\nprint(x)", "session_id": "k", "timeout_s": 60})
	if out.Stdout != "42\n" {
		t.Errorf("session: %+v", out)
	}
	// A timeout deletes the pod and says so.
	out, res := s.exec(map[string]any{"code": "import time\nprint('start', flush=True)\ntime.sleep(600)", "timeout_s": 3})
	if !out.TimedOut || !res.IsError || !strings.Contains(out.Stdout, "start") {
		t.Errorf("timeout: %+v", out)
	}
	// A cancelled call ends its pod.
	cctx, cancel := context.WithCancel(ctx)
	go func() { time.Sleep(4 * time.Second); cancel() }()
	_, err := s.cs.CallTool(cctx, &mcp.CallToolParams{Name: "execute_code", Arguments: map[string]any{"code": "import time\ntime.sleep(600)", "timeout_s": 300}})
	if err == nil {
		t.Error("the cancelled call returned a result")
	}
	out, _ = s.exec(map[string]any{"code": "print('after')", "timeout_s": 60})
	if out.Stdout != "after\n" {
		t.Errorf("a run after the cancellation: %+v", out)
	}
	s.call("close_session", map[string]any{"session_id": "k"})
	// A probe (check_installed_packages) runs in a pod of its own and is
	// read back from the pod's log.
	if st := s.check("pip"); !st.Installed || st.Version == "" {
		t.Errorf("check_installed_packages pip: %+v; want installed, with its version", st)
	}

	// Over HTTP with two tenants, as the manifests deploy it: /healthz
	// answers for the API server, and each tenant's run is a pod.
	h := startHTTP(t, false, "PYBOX_BACKEND=kubernetes", "KUBECONFIG="+kubeconfig, k8sAccept, "PYBOX_WARM_POOL=0", "PYBOX_IMAGE="+image)
	if resp, err := http.Get(h.url + "/healthz"); err != nil {
		t.Error(err)
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), `"kubernetes":"ok"`) {
			t.Errorf("/healthz on Kubernetes: %d %s", resp.StatusCode, body)
		}
	}
	for _, tok := range []string{tokenA, tokenB} {
		cs := h.connect(tok)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_code", Arguments: map[string]any{"code": "print('over http')", "timeout_s": 120}})
		if err != nil || !strings.Contains(text(res), "over http") {
			t.Errorf("execute_code over HTTP as a pod: %v %s", err, text(res))
		}
		cs.Close()
	}
	h.stop()

	// A server killed with SIGKILL leaves no pod running: each runner ends
	// when its attach stream closes (StdinOnce), or, for a pod the server
	// created but never attached to (the pool's, when it is killed while
	// the pod is pending), when nobody speaks to it within the runner's
	// GREET (60 s). Its pods, completed, are then deleted by another
	// server on the namespace (a live replica, with state of its own: no
	// lease file tells it about the dead one).
	k := startServer(t, "PYBOX_BACKEND=kubernetes", "KUBECONFIG="+kubeconfig, k8sAccept, "PYBOX_WARM_POOL=1", "PYBOX_IMAGE="+image)
	k.exec(map[string]any{"code": "print(1)", "timeout_s": 120}) // asks for the pool
	k.exec(map[string]any{"code": "x = 1", "session_id": "doomed", "timeout_s": 120})
	mine := metav1.ListOptions{LabelSelector: "pybox.pid=" + strconv.Itoa(k.cmd.Process.Pid)}
	running := func() (n, all int) {
		list, err := cs.CoreV1().Pods(ns).List(context.Background(), mine)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodPending {
				n++
			}
		}
		return n, len(list.Items)
	}
	wait, stop := context.WithTimeout(ctx, 2*time.Minute)
	testenv.WaitFor(wait, func() bool { n, _ := running(); return n >= 2 }) // the session's and the pool's
	stop()
	before, _ := running()
	k.kill()
	killed := time.Now()
	wait, stop = context.WithTimeout(ctx, 3*time.Minute) // GREET, and a pending pod's start on a loaded node
	gone := testenv.WaitFor(wait, func() bool { n, _ := running(); return n == 0 })
	stop()
	left, _ := running()
	t.Logf("killed server: %d of its %d pods still running %v after the kill", left, before, time.Since(killed).Round(time.Millisecond))
	if !gone || before < 2 {
		t.Errorf("killed server: %d of its %d pods still running after three minutes; want none of at least 2", left, before)
	}
	// The servers alive on the namespace delete them once they ended (s,
	// and a server started now: it looks at its start, then every 15 s).
	startServer(t, "PYBOX_BACKEND=kubernetes", "KUBECONFIG="+kubeconfig, k8sAccept, "PYBOX_WARM_POOL=0", "PYBOX_IMAGE="+image)
	wait, stop = context.WithTimeout(ctx, 3*time.Minute)
	reaped := testenv.WaitFor(wait, func() bool { _, all := running(); return all == 0 })
	stop()
	t.Logf("killed server: its pods deleted by the live servers %v after the kill (%v)", time.Since(killed).Round(time.Millisecond), reaped)
	if !reaped {
		_, all := running()
		t.Errorf("killed server: %d of its pods still there 3 minutes after another server started", all)
		if err := cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, mine); err != nil {
			t.Error(err)
		}
	}

	// pybox bench -kubernetes: the latency rows as pods, beside Docker's.
	n := cmp.Or(os.Getenv("PYBOX_K8S_BENCH_N"), "3")
	bench := exec.CommandContext(ctx, pyboxBin, "bench", "-n", n, "-kubernetes", kubeconfig, "-json", "-")
	bench.Env = append(os.Environ(), "PYBOX_BUILD=never", "PYBOX_IMAGE="+image, k8sAccept)
	var berr strings.Builder
	bench.Stderr = &berr
	js, err := bench.Output()
	if err != nil {
		t.Fatalf("pybox bench -kubernetes: %v\n%s", err, berr.String())
	}
	var rep struct {
		Rows []struct {
			Name    string  `json:"name"`
			P50     float64 `json:"p50_ms"`
			P95     float64 `json:"p95_ms"`
			Skipped string  `json:"skipped"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(js, &rep); err != nil {
		t.Fatalf("bench report: %v\n%s", err, js)
	}
	kube, gvisor := 0, 0
	for _, r := range rep.Rows {
		t.Logf("%-70s p50 %8.1f ms  p95 %8.1f ms %s", r.Name, r.P50, r.P95, r.Skipped)
		if r.Skipped != "" || r.P50 <= 0 {
			t.Errorf("bench row %q: skipped %q, p50 %v", r.Name, r.Skipped, r.P50)
		}
		if strings.HasSuffix(r.Name, "[kubernetes]") {
			kube++
		}
		if strings.HasSuffix(r.Name, "[kubernetes "+testenv.RunscClass+"]") {
			gvisor++
		}
	}
	if kube != 4 {
		t.Errorf("%d Kubernetes rows, want 4 (warm, back to back, session, cold)", kube)
	}
	if want := map[bool]int{true: 4}[node.Runsc]; gvisor != want {
		t.Errorf("%d rows of pods under gVisor, want %d (the node has RuntimeClass %s: %v)", gvisor, want, testenv.RunscClass, node.Runsc)
	}
	if t.Failed() || os.Getenv("PYBOX_K8S_BENCH_LOG") != "" {
		t.Logf("bench stderr:\n%s", berr.String())
	}
}
