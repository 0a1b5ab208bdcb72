//go:build linux

package testenv

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestKubeNodesCoexist: two test nodes (each with its control plane)
// start at once on one machine, each runs a pod, and stopping one leaves
// the other's pod processes, bridge and cgroups alone; the survivor still
// starts pods. The node started with fixed names (bridge pyboxk8s0,
// kubelet port 10250, cgroup tree kubepods) and its Stop killed every
// process in kubepods: the second kubelet could not bind its port.
func TestKubeNodesCoexist(t *testing.T) {
	bin := KubeBin(t)
	if why := KubeNodeReady(bin); why != "" {
		if os.Getenv("PYBOX_REQUIRE_K8S") != "" {
			t.Fatalf("PYBOX_REQUIRE_K8S is set but no node can run here: %s", why)
		}
		t.Skip(why)
	}
	var nodes [2]*Node
	var errs [2]error
	var wg sync.WaitGroup
	start := time.Now()
	for i := range nodes {
		wg.Go(func() { nodes[i], errs[i] = startTestNode(t, bin) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("two nodes started side by side in %v", time.Since(start).Round(time.Millisecond))
	a, b := nodes[0], nodes[1]
	if a.names.bridge == b.names.bridge || a.names.cgroupRoot == b.names.cgroupRoot || a.names.network == b.names.network {
		t.Fatalf("two nodes share names: %+v %+v", a.names, b.names)
	}
	runPausePod(t, a, "a")
	runPausePod(t, b, "b")
	before := nodePids(b)
	if len(before) == 0 {
		t.Fatal("node b's pod has no process in its cgroup tree")
	}
	a.Stop()
	for _, pid := range before {
		if syscall.Kill(pid, 0) != nil {
			t.Errorf("stopping node a ended node b's process %d", pid)
		}
	}
	for _, m := range cgroupMounts() {
		if _, err := os.Stat(filepath.Join(m, a.names.cgroupRoot)); err == nil {
			t.Errorf("node a's cgroup root is left in %s", m)
		}
	}
	if _, err := os.Stat("/sys/class/net/" + a.names.bridge); err == nil {
		t.Errorf("node a's bridge %s is left", a.names.bridge)
	}
	if _, err := os.Stat("/sys/class/net/" + b.names.bridge); err != nil {
		t.Errorf("node b's bridge %s went with node a: %v", b.names.bridge, err)
	}
	runPausePod(t, b, "b2") // node b still serves
	after := nodePids(b)
	for _, pid := range before {
		if !slices.Contains(after, pid) {
			t.Errorf("node b's pod process %d is gone after a second pod (%v)", pid, after)
		}
	}
}

// startTestNode starts a control plane and a node for t (stopped with it).
func startTestNode(t *testing.T, bin string) (*Node, error) {
	cp, err := StartControlPlane(bin, t.TempDir())
	if err != nil {
		return nil, err
	}
	t.Cleanup(cp.Stop)
	start := time.Now()
	n, err := StartNode(cp, bin)
	if err != nil {
		return nil, err
	}
	t.Logf("node %s started in %v", n.names.id, time.Since(start).Round(time.Millisecond))
	t.Cleanup(n.Stop)
	return n, nil
}

// runPausePod runs a pod of the pause image on n and waits until it runs.
func runPausePod(t *testing.T, n *Node, name string) {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(n.cp.Admin)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}} // no controller manager makes it
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(t.Context(), sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
		TerminationGracePeriodSeconds: new(int64), AutomountServiceAccountToken: new(bool),
		Containers: []corev1.Container{{Name: "p", Image: PauseImage, ImagePullPolicy: corev1.PullNever}}}}
	if _, err := cs.CoreV1().Pods("default").Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if !WaitFor(ctx, func() bool {
		p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning
	}) {
		t.Fatalf("pod %s of node %s not running within 2 minutes; kubelet log:\n%s", name, n.names.id, n.Log("kubelet"))
	}
}

// nodePids lists the processes in n's cgroup tree (its pods').
func nodePids(n *Node) []int {
	var pids []int
	for _, m := range cgroupMounts() {
		for _, p := range cgroupPids(filepath.Join(m, n.names.cgroupRoot)) {
			if !slices.Contains(pids, p) {
				pids = append(pids, p)
			}
		}
	}
	return pids
}
