package kube_test

import (
	"bufio"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/pybox-dev/pybox/internal/contract"
	"github.com/pybox-dev/pybox/internal/kube"
	"github.com/pybox-dev/pybox/internal/testenv"
)

var (
	nodeOnce  sync.Once
	node      *testenv.Node
	nodeImage string
	nodeErr   error
)

// withNode is the shared control plane with a real node (kubelet,
// containerd, CNI) that runs the runtime image; it skips where no node
// can run (not root, binaries missing) unless PYBOX_REQUIRE_K8S is set.
func withNode(t *testing.T) *testenv.ControlPlane {
	t.Helper()
	c := cluster(t)
	bin := os.Getenv("PYBOX_K8S_BIN")
	if why := testenv.KubeNodeReady(bin); why != "" {
		if os.Getenv("PYBOX_REQUIRE_K8S") != "" {
			t.Fatalf("PYBOX_REQUIRE_K8S is set but no node can run here: %s", why)
		}
		t.Skip(why)
	}
	image := testenv.RuntimeImage(t, testenv.Docker(t), "base")
	nodeOnce.Do(func() {
		nodeImage = image
		node, nodeErr = testenv.StartNode(c, bin, image)
	})
	if nodeErr != nil {
		t.Fatal(nodeErr)
	}
	return c
}

// TestColdStart: Start answers once the runner's stdin and stdout are
// attached, without waiting for the kubelet's next relist to report the
// container running; the program's first line comes back through the
// stream. It logs the figures (create to attached, and to the echo).
func TestColdStart(t *testing.T) {
	c := withNode(t)
	_, _, b := backendIn(t, c, kube.Config{})
	ctx := t.Context()
	var attached, echoed []time.Duration
	for i := range 5 {
		spec := runSpec("pybox-cold-"+string(rune('a'+i)), "")
		spec.Config.Image = nodeImage
		spec.Config.Cmd = []string{contract.VenvPython, "-c", "import sys\nprint('echo', sys.stdin.readline().strip(), flush=True)"}
		start := time.Now()
		a, err := b.Start(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		attached = append(attached, time.Since(start))
		if _, err := a.Write([]byte("hello\n")); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(a.Output()).ReadString('\n')
		echoed = append(echoed, time.Since(start))
		if line != "echo hello\n" {
			t.Errorf("run %d: %q, %v; want the echo through the attach stream", i, line, err)
		}
		if err := a.Destroy(ctx); err != nil {
			t.Error(err)
		}
	}
	t.Logf("cold start to attached: p50 %v %v; to the echo: p50 %v %v", median(attached), attached, median(echoed), echoed)
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestClusterChecks: on the test node, whose bridge CNI enforces no
// NetworkPolicy and whose kubelet sets no podPidsLimit, the start checks
// find both: the probe pods connected despite the deny-all policy, and
// one started thousands of threads. Both probe pods are gone afterwards.
func TestClusterChecks(t *testing.T) {
	got, _, cs, ns := checkCluster(t, "")
	if got.Err != nil {
		t.Fatal(got.Err)
	}
	if got.NetworkPolicy || got.Network != "connected" {
		t.Errorf("network: %q, enforced %v; want connected (the test node's bridge enforces no policy)", got.Network, got.NetworkPolicy)
	}
	if got.PidsBounded {
		t.Errorf("pids: %q; want no bound (the test node sets no podPidsLimit)", got.Pids)
	}
	if f := got.Failed(); !slices.Equal(f, []string{kube.CheckNetworkPolicy, kube.CheckPids}) {
		t.Errorf("failed checks %v", f)
	}
	noProbeLeft(t, cs, ns)
}

// TestClusterChecksEndWithTheirPods: under gVisor the probe's threads
// are stopped by its memory limit before it reports its pids bound; the
// checks then end with the pod, naming what they found, instead of
// waiting out their two minutes (every server start under runsc did).
func TestClusterChecksEndWithTheirPods(t *testing.T) {
	got, took, cs, ns := checkCluster(t, testenv.RunscClass)
	if took > time.Minute {
		t.Errorf("the checks took %v (they wait two minutes for pods that never answer)", took)
	}
	if got.Network != "connected" {
		t.Errorf("network: %q; want connected (the probe reports it before its threads)", got.Network)
	}
	if got.Err == nil && !strings.HasPrefix(got.Pids, "none") {
		t.Errorf("pids %q with no error: the test node sets no podPidsLimit", got.Pids)
	}
	noProbeLeft(t, cs, ns)
}

// checkCluster runs the start checks on the test node, their pods under
// runtime ("" = the node's default), and says how long they took.
func checkCluster(t *testing.T, runtime string) (kube.Checks, time.Duration, kubernetes.Interface, string) {
	t.Helper()
	c := withNode(t)
	cs, ns := namespace(t, c)
	b, err := kube.NewWith(t.Context(), cs, c.Admin, kube.Config{}, ns)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	got := b.CheckCluster(t.Context(), kube.ProbeImage{Image: nodeImage, Runtime: runtime})
	took := time.Since(start)
	t.Logf("checks (runtime %q) in %v: %+v", runtime, took, got)
	return got, took, cs, ns
}

func noProbeLeft(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	pods, err := cs.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			t.Errorf("probe pod %s left", p.Name)
		}
	}
}
