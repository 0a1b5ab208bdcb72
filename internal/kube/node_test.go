package kube_test

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
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
// stream. It runs under the node's default runtime and, where the node
// has it, under gVisor (RuntimeClass runsc), and logs where the time goes
// (coldSteps).
func TestColdStart(t *testing.T) {
	withNode(t)
	runtimes := []string{""}
	if node.Runsc {
		runtimes = append(runtimes, testenv.RunscClass)
	}
	for _, rt := range runtimes {
		t.Run(cmp.Or(rt, "default"), func(t *testing.T) { coldStarts(t, rt) })
	}
}

func coldStarts(t *testing.T, runtime string) {
	c := withNode(t)
	cs, ns, b := backendIn(t, c, kube.Config{})
	ctx := t.Context()
	seen := observePods(t, cs, ns)
	steps := newColdSteps()
	for i := range 5 {
		spec := runSpec("pybox-cold-"+string(rune('a'+i)), runtime)
		spec.Config.Image = nodeImage
		spec.Config.Cmd = []string{contract.VenvPython, "-c", "import sys\nprint('echo', sys.stdin.readline().strip(), flush=True)"}
		start := time.Now()
		a, err := b.Start(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		attached := time.Now()
		if _, err := a.Write([]byte("hello\n")); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(a.Output()).ReadString('\n')
		echoed := time.Now()
		if line != "echo hello\n" {
			t.Errorf("run %d: %q, %v; want the echo through the attach stream", i, line, err)
		}
		attempts, lastTry := kube.AttachAttempts(a)
		if err := a.Destroy(ctx); err != nil {
			t.Error(err)
		}
		cri, err := node.CRISteps(ns, a.ContainerID(), kube.ContainerName)
		if err != nil {
			t.Fatal(err)
		}
		kl, err := node.KubeletSteps(ns, a.ContainerID())
		if err != nil {
			t.Fatal(err)
		}
		pod := seen(a.ContainerID())
		steps.add(start, attempts, map[string]time.Time{
			"kubelet: pod received (at -v=3)":              kl.Added,
			"kubelet: volume wait begins (at -v=3)":        kl.VolumesAsked,
			"kubelet: volumes mounted (at -v=3)":           kl.VolumesReady,
			"bound (the scheduler; pybox's watch sees it)": pod.bound,
			"kubelet's first status (its sync begins)":     pod.kubelet,
			"containerd: sandbox asked":                    cri.SandboxAsked,
			"containerd: sandbox ready (pause, network)":   cri.SandboxReady,
			"containerd: container create asked":           cri.CreateAsked,
			"containerd: container created":                cri.Created,
			"containerd: container start asked":            cri.StartAsked,
			"containerd: container started":                cri.Started,
			"the last attach request begins":               lastTry,
			"attached (Start returns)":                     attached,
			"the program's echo read":                      echoed,
		})
	}
	steps.log(t)
}

// TestStartWithoutEvents: an account that may not watch events (a Role
// from before pybox followed the kubelet's Started events) still gets its
// pod attached and the runner's echo back: pybox logs once that it cannot
// follow the events, and tries to attach from the moment the pod is bound.
func TestStartWithoutEvents(t *testing.T) {
	c := withNode(t)
	cs, ns := namespace(t, c)
	ctx := t.Context()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pybox-no-events", Namespace: ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "get", "list", "watch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods/attach"}, Verbs: []string{"create", "get"}},
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: []string{"create", "get"}},
	}}
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "default", Namespace: ns}}}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := testenv.Token(ctx, cs, ns, "default")
	if err != nil {
		t.Fatal(err)
	}
	rc := c.Config(tok)
	var logs testenv.LogBuffer
	var b *kube.Backend
	if !testenv.WaitFor(ctx, func() bool { // until the binding is in force
		b, err = kube.NewWith(ctx, kubernetes.NewForConfigOrDie(rc), rc, kube.Config{Log: slog.New(slog.NewTextHandler(&logs, nil))}, ns)
		return err == nil
	}) {
		t.Fatal(err)
	}
	spec := runSpec("pybox-no-events", "")
	spec.Config.Image = nodeImage
	spec.Config.Cmd = []string{contract.VenvPython, "-c", "import sys\nprint('echo', sys.stdin.readline().strip(), flush=True)"}
	a, err := b.Start(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Destroy(context.WithoutCancel(ctx))
	if _, err := a.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(a.Output()).ReadString('\n'); line != "echo hello\n" {
		t.Errorf("%q, %v; want the echo through the attach stream", line, err)
	}
	if got, ok := logs.Await("cannot watch the sandboxes' events"); !ok {
		t.Errorf("no word of the events it could not watch; log:\n%s", got)
	}
}

// coldSteps are the milestones of cold starts, from each start's own
// beginning, and the attach requests each made.
type coldSteps struct {
	at       map[string][]time.Duration
	attempts []int
}

func newColdSteps() *coldSteps { return &coldSteps{at: map[string][]time.Duration{}} }

func (s *coldSteps) add(start time.Time, attempts int, at map[string]time.Time) {
	for k, v := range at {
		if !v.IsZero() {
			s.at[k] = append(s.at[k], v.Sub(start))
		}
	}
	s.attempts = append(s.attempts, attempts)
}

// log writes each milestone's p50 from the start, and the p50 of the
// step from the milestone before it, in the order they came.
func (s *coldSteps) log(t *testing.T) {
	names := slices.Collect(maps.Keys(s.at))
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(median(s.at[a]), median(s.at[b])) })
	var out strings.Builder
	fmt.Fprintf(&out, "cold start, p50 of %d runs (load %s):\n%-48s %8s %8s\n", len(s.attempts), loadavg(), "milestone", "from 0", "step")
	var prev []time.Duration
	for _, k := range names {
		d := s.at[k]
		step := median(d)
		if prev != nil && len(prev) == len(d) {
			steps := make([]time.Duration, len(d))
			for i := range d {
				steps[i] = d[i] - prev[i]
			}
			step = median(steps)
		}
		fmt.Fprintf(&out, "%-48s %8.0f %8.0f\n", k, ms(median(d)), ms(step))
		prev = d
	}
	fmt.Fprintf(&out, "attach requests per start: %v", s.attempts)
	t.Log(out.String())
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// podSeen is when a watch first saw a pod bound to the node and the
// kubelet's first status of it.
type podSeen struct{ bound, kubelet time.Time }

// observePods watches ns's pods for the test's length; the function it
// returns says what it saw of one.
func observePods(t *testing.T, cs kubernetes.Interface, ns string) func(name string) podSeen {
	t.Helper()
	w, err := cs.CoreV1().Pods(ns).Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	var mu sync.Mutex
	seen := map[string]podSeen{}
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			now := time.Now()
			mu.Lock()
			s := seen[p.Name]
			if s.bound.IsZero() && p.Spec.NodeName != "" {
				s.bound = now
			}
			if s.kubelet.IsZero() && p.Status.StartTime != nil {
				s.kubelet = now
			}
			seen[p.Name] = s
			mu.Unlock()
		}
	}()
	return func(name string) podSeen {
		mu.Lock()
		defer mu.Unlock()
		return seen[name]
	}
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
