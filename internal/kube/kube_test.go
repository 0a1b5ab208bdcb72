package kube_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/mount"
	appsv1 "k8s.io/api/apps/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/pybox-dev/pybox/internal/engine"
	"github.com/pybox-dev/pybox/internal/kube"
	"github.com/pybox-dev/pybox/internal/lease"
	"github.com/pybox-dev/pybox/internal/testenv"
	"github.com/pybox-dev/pybox/sandbox"
)

var (
	cpOnce sync.Once
	cp     *testenv.ControlPlane
	cpErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if node != nil {
		node.Stop()
	}
	if cp != nil {
		cp.Stop()
		os.RemoveAll(cp.Dir)
	}
	os.Exit(code)
}

// cluster is a real etcd and kube-apiserver shared by the package's tests.
func cluster(t *testing.T) *testenv.ControlPlane {
	t.Helper()
	bin := testenv.KubeBin(t)
	cpOnce.Do(func() {
		dir, err := os.MkdirTemp("", "pybox-k8s-")
		if err != nil {
			cpErr = err
			return
		}
		cp, cpErr = testenv.StartControlPlane(bin, dir)
	})
	if cpErr != nil {
		t.Fatal(cpErr)
	}
	return cp
}

// namespace makes a fresh namespace with its default ServiceAccount (no
// controller-manager runs to make it) and returns an admin client.
func namespace(t *testing.T, c *testenv.ControlPlane) (kubernetes.Interface, string) {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(c.Admin)
	ns := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(ns) > 50 {
		ns = ns[:50]
	}
	ns = strings.Trim(ns, "-") + fmt.Sprintf("-%d", time.Now().UnixNano()%100000)
	ctx := t.Context()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return cs, ns
}

// backendIn makes a fresh namespace on c and a backend of cfg for it.
func backendIn(t *testing.T, c *testenv.ControlPlane, cfg kube.Config) (kubernetes.Interface, string, *kube.Backend) {
	t.Helper()
	cs, ns := namespace(t, c)
	b, err := kube.NewWith(t.Context(), cs, c.Admin, cfg, ns)
	if err != nil {
		t.Fatal(err)
	}
	return cs, ns, b
}

// runSpec is a stateless run's container, as the sandbox builds it.
func runSpec(name, runtime string) engine.Spec {
	cmd := append([]string{"/opt/venv/bin/python"}, "-c", "print(1)")
	plan := sandbox.Plan{Image: "pybox-runtime:base", Cmd: cmd, User: "10001:10001", Env: map[string]string{"HOME": "/tmp"},
		Scratch: true, Labels: map[string]string{sandbox.LabelManaged: "true", sandbox.LabelOwner: "abc", sandbox.LabelLease: "/state/owners/abc.lock"},
		Runtime: runtime, Stdin: true, Limits: sandbox.Limits{}.WithDefaults()}
	cfg, host := sandbox.ContainerConfig(plan)
	return engine.Spec{Name: name, Config: cfg, Host: host}
}

// TestPodsCarryTheContract: what the API server stored for a sandbox pod
// carries the full hardening of the container contract, and the namespace
// has the deny-all NetworkPolicy.
func TestPodsCarryTheContract(t *testing.T) {
	c := cluster(t)
	cs, ns := namespace(t, c)
	ctx := t.Context()
	if _, err := cs.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor"}, Handler: "runsc"}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	b, err := kube.NewWith(ctx, cs, c.Admin, kube.Config{WorkspaceBytes: 64 << 20}, ns)
	if err != nil {
		t.Fatal(err)
	}
	created, err := b.Create(ctx, runSpec("pybox-run-abc-1", "gvisor"))
	if err != nil {
		t.Fatal(err)
	}
	pod, err := cs.CoreV1().Pods(ns).Get(ctx, created.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := pod.Spec
	if len(s.Containers) != 1 {
		t.Fatalf("containers: %d", len(s.Containers))
	}
	ct := s.Containers[0]
	sc := ct.SecurityContext
	checks := map[string]bool{
		"runs as 10001:10001, non-root": *sc.RunAsUser == 10001 && *sc.RunAsGroup == 10001 && *sc.RunAsNonRoot && *s.SecurityContext.RunAsNonRoot,
		"every capability dropped":      sc.Capabilities != nil && len(sc.Capabilities.Drop) == 1 && sc.Capabilities.Drop[0] == "ALL" && len(sc.Capabilities.Add) == 0,
		"no privilege escalation":       sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation && !*sc.Privileged,
		"read-only root":                *sc.ReadOnlyRootFilesystem,
		"seccomp RuntimeDefault":        sc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault && s.SecurityContext.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault,
		"no service-account token":      s.AutomountServiceAccountToken != nil && !*s.AutomountServiceAccountToken,
		"no service links":              s.EnableServiceLinks != nil && !*s.EnableServiceLinks,
		"never restarted":               s.RestartPolicy == corev1.RestartPolicyNever,
		"gVisor runtime class":          s.RuntimeClassName != nil && *s.RuntimeClassName == "gvisor",
		"host namespaces unshared":      !s.HostNetwork && !s.HostPID && !s.HostIPC,
		"stdin for the runner":          ct.Stdin && !ct.TTY,
		"memory limit 512Mi":            ct.Resources.Limits.Memory().Cmp(resource.MustParse("512Mi")) == 0,
		"CPU limit":                     !ct.Resources.Limits.Cpu().IsZero(),
		"labelled for the policy":       pod.Labels[sandbox.LabelManaged] == "true" && pod.Labels[sandbox.LabelOwner] == "abc",
		"lease path kept as annotation": pod.Annotations[sandbox.LabelLease] == "/state/owners/abc.lock",
	}
	for what, ok := range checks {
		if !ok {
			t.Errorf("stored pod: not %s", what)
		}
	}
	mounts := map[string]*corev1.EmptyDirVolumeSource{}
	for _, m := range ct.VolumeMounts {
		for _, v := range s.Volumes {
			if v.Name == m.Name {
				mounts[m.MountPath] = v.EmptyDir
			}
		}
	}
	for _, p := range []string{"/tmp", "/workspace"} {
		if v := mounts[p]; v == nil || v.Medium != corev1.StorageMediumMemory || v.SizeLimit == nil || v.SizeLimit.IsZero() {
			t.Errorf("%s: want a sized memory-backed emptyDir, got %+v", p, v)
		}
	}
	np, err := cs.NetworkingV1().NetworkPolicies(ns).Get(ctx, kube.NetworkPolicyName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the deny-all NetworkPolicy: %v", err)
	}
	if np.Spec.PodSelector.MatchLabels[sandbox.LabelManaged] != "true" || len(np.Spec.PolicyTypes) != 2 || len(np.Spec.Ingress) != 0 || len(np.Spec.Egress) != 0 {
		t.Errorf("NetworkPolicy is not deny-all for pybox pods: %+v", np.Spec)
	}
	// Refused, and nothing created: a host folder elsewhere than /workspace.
	bad := runSpec("pybox-run-abc-2", "")
	bad.Host.Mounts = append(bad.Host.Mounts, hostMount("/etc", "/host-etc"))
	if _, err := b.Create(ctx, bad); !errors.Is(err, kube.ErrUnsupported) {
		t.Errorf("a host folder at /host-etc: %v, want ErrUnsupported", err)
	}
	if _, err := cs.CoreV1().Pods(ns).Get(ctx, "pybox-run-abc-2", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused pod exists: %v", err)
	}
}

// withAccounts applies cmd/pybox/kubernetes's namespaces and accounts to
// the test cluster.
func withAccounts(t *testing.T) (*testenv.ControlPlane, kubernetes.Interface, testenv.Manifests) {
	t.Helper()
	c := cluster(t)
	cs := kubernetes.NewForConfigOrDie(c.Admin)
	m, err := testenv.ReadManifests(manifests)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.ApplyAccounts(t.Context(), cs); err != nil {
		t.Fatal(err)
	}
	return c, cs, m
}

// TestRBAC: pybox's account, as cmd/pybox/kubernetes's manifests make it
// (its own namespace, the Role in the sandboxes' namespace), gets a clear
// error naming them while it lacks the Role; with it, pybox manages its
// pods in the sandboxes' namespace, and nothing beyond (secrets, exec,
// pods in the server's namespace, the server's replicas).
func TestRBAC(t *testing.T) {
	c, cs, m := withAccounts(t)
	ctx := t.Context()
	ns, server := m.SandboxNamespace(), m.Accounts[0].Namespace
	if ns == server {
		t.Fatalf("the sandboxes' namespace is the server's (%s)", ns)
	}
	// An account of the server's namespace without the binding.
	bare := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "pybox-unbound", Namespace: server}}
	if _, err := cs.CoreV1().ServiceAccounts(server).Create(ctx, bare, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	kubeconfig, err := c.Kubeconfig("pybox-unbound", token(t, cs, server, bare.Name), ns)
	if err != nil {
		t.Fatal(err)
	}
	_, err = kube.New(ctx, kube.Config{Kubeconfig: kubeconfig})
	if err == nil || !strings.Contains(err.Error(), "forbidden") || !strings.Contains(err.Error(), "cmd/pybox/kubernetes") {
		t.Fatalf("without the Role: %v; want a forbidden error naming the manifests", err)
	}
	if err := m.ApplyRBAC(ctx, cs); err != nil {
		t.Fatal(err)
	}
	tok := token(t, cs, server, m.Accounts[0].Name)
	if kubeconfig, err = c.Kubeconfig("pybox-rbac", tok, ns); err != nil {
		t.Fatal(err)
	}
	var b *kube.Backend
	if !testenv.WaitFor(ctx, func() bool { b, err = kube.New(ctx, kube.Config{Kubeconfig: kubeconfig}); return err == nil }) {
		t.Fatalf("with the Role: %v", err)
	}
	if b.Namespace() != ns {
		t.Errorf("namespace %q, want the kubeconfig's %q", b.Namespace(), ns)
	}
	// The ClusterRole lets it check the RuntimeClass PYBOX_RUNTIME names.
	if _, err := kube.New(ctx, kube.Config{Kubeconfig: kubeconfig, RuntimeClass: "no-such-class"}); err == nil || !strings.Contains(err.Error(), `no RuntimeClass "no-such-class"`) {
		t.Errorf("a RuntimeClass the cluster lacks: %v; want an error naming it", err)
	}
	pod, err := b.Create(ctx, runSpec("pybox-run-rbac-1", ""))
	if err != nil {
		t.Fatal(err)
	}
	if list, err := b.List(ctx, map[string]string{sandbox.LabelOwner: "abc"}); err != nil || len(list) != 1 {
		t.Errorf("list: %v %v", list, err)
	}
	if err := b.Remove(ctx, pod.Name); err != nil {
		t.Errorf("remove: %v", err)
	}
	sa := kubernetes.NewForConfigOrDie(c.Config(tok))
	for _, ra := range []authzv1.ResourceAttributes{
		{Namespace: ns, Verb: "get", Resource: "secrets"},
		{Namespace: ns, Verb: "create", Resource: "pods", Subresource: "exec"},
		{Namespace: ns, Verb: "update", Resource: "pods"},
		{Namespace: server, Verb: "create", Resource: "pods"},
		{Namespace: server, Verb: "delete", Resource: "pods"},
		{Namespace: server, Verb: "create", Resource: "pods", Subresource: "attach"},
		{Namespace: "default", Verb: "create", Resource: "pods"},
		{Verb: "update", Resource: "namespaces", Name: ns},
		{Verb: "create", Group: "node.k8s.io", Resource: "runtimeclasses"},
	} {
		r, err := sa.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authzv1.SelfSubjectAccessReview{Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &ra}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Allowed {
			t.Errorf("the Role allows more than the backend needs: %s %s/%s %s in %q", ra.Verb, ra.Resource, ra.Subresource, ra.Name, ra.Namespace)
		}
	}
}

// TestPodSecurity: the sandboxes' namespace, as namespace.yaml makes it,
// is under Pod Security `restricted`: the API server refuses a privileged
// pod, a hostPath pod, a host-network pod and a root pod there, even from
// an admin; pybox's own pods (a run, a session with its workspace, under
// a RuntimeClass) are admitted, and so is the server's pod of
// deployment.yaml in its own restricted namespace.
func TestPodSecurity(t *testing.T) {
	c, cs, m := withAccounts(t)
	ctx := t.Context()
	ns := m.SandboxNamespace()
	hostile := map[string]func(*corev1.Pod){
		"privileged": func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr(true)}
		},
		"hostPath": func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "root", MountPath: "/host"}}
		},
		"hostNetwork": func(p *corev1.Pod) { p.Spec.HostNetwork = true },
		"root":        func(p *corev1.Pod) { p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr(int64(0))} },
	}
	_, open := namespace(t, c) // no Pod Security labels: the control
	for name, mutate := range hostile {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hostile-" + strings.ToLower(name)},
			Spec: corev1.PodSpec{NodeName: "nowhere", Containers: []corev1.Container{{Name: "c", Image: "pybox-runtime:base"}}}}
		mutate(p) // bound to no real node: admitted in the control, it never runs
		_, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		switch {
		case name == "privileged" && apierrors.IsInvalid(err) && strings.Contains(err.Error(), "disallowed by cluster policy"):
			// this API server allows no privileged pod anywhere (--allow-privileged=false)
		case !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "violates PodSecurity \"restricted:latest\""):
			t.Errorf("a %s pod in %s: %v; want it refused by PodSecurity restricted", name, ns, err)
			_ = cs.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{})
		}
		if name == "privileged" {
			continue
		}
		// The control: without the labels the same pod is admitted.
		if _, err := cs.CoreV1().Pods(open).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Errorf("a %s pod in a namespace without Pod Security labels: %v; want it admitted", name, err)
		}
	}
	if _, err := cs.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor"}, Handler: "runsc"}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// The server's own pod, as deployment.yaml makes it, meets restricted
	// in its namespace (a dry run: admission runs, nothing is stored).
	raw, err := os.ReadFile(filepath.Join(manifests, "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var dep appsv1.Deployment
	if err := yaml.UnmarshalStrict(raw, &dep); err != nil {
		t.Fatal(err)
	}
	server := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pybox-server", Labels: dep.Spec.Template.Labels}, Spec: dep.Spec.Template.Spec}
	server.Spec.ServiceAccountName = "" // the dry run needs no account
	if _, err := cs.CoreV1().Pods(dep.Namespace).Create(ctx, server, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("the server's pod (deployment.yaml) in %s: %v", dep.Namespace, err)
	}
	b, err := kube.NewWith(ctx, cs, c.Admin, kube.Config{WorkspaceBytes: 64 << 20}, ns)
	if err != nil {
		t.Fatal(err)
	}
	session := runSpec("pybox-session-psa-1", "gvisor")
	delete(session.Host.Tmpfs, "/workspace")
	session.Host.Mounts = append(session.Host.Mounts, hostMount("/state/sessions/x", "/workspace"))
	for _, spec := range []engine.Spec{runSpec("pybox-run-psa-1", ""), session} {
		pod, err := b.Create(ctx, spec)
		if err != nil {
			t.Errorf("pybox's pod %s refused in %s: %v", spec.Name, ns, err)
			continue
		}
		if err := b.Remove(ctx, pod.Name); err != nil {
			t.Error(err)
		}
	}
}

// manifests is cmd/pybox/kubernetes from here.
const manifests = "../../cmd/pybox/kubernetes"

// TestReapByLabel: pods a dead pybox left (its lease released, not held)
// are removed by the next one on the same state, found by their labels
// and the lease path kept as an annotation; a live owner's pods stay.
func TestReapByLabel(t *testing.T) {
	c := cluster(t)
	cs, ns, b := backendIn(t, c, kube.Config{})
	ctx := t.Context()
	leases := filepath.Join(t.TempDir(), "owners")
	newSandbox := func() *sandbox.Sandbox {
		sb, err := sandbox.New(sandbox.Config{Backend: sandbox.Kubernetes(b), LeaseDir: leases, WarmPool: -1})
		if err != nil {
			t.Fatal(err)
		}
		return sb
	}
	podOf := func(o sandbox.Owner, role string) string {
		spec := runSpec(o.ContainerName(role), "")
		spec.Config.Labels = o.Labels(role)
		p, err := b.Create(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		return p.Name
	}
	live := newSandbox()
	defer live.Close()
	// A pybox that died (killed, crashed): its lease file is there, unlocked,
	// and its pods stay. (Close would remove them: it removes every pod of
	// its lease.)
	dir, err := lease.Open(leases)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	dead, err := dir.Acquire(lease.NewID())
	if err != nil {
		t.Fatal(err)
	}
	gone := sandbox.NewOwner()
	gone.ID, gone.Lease = dead.ID(), dead.Path()
	left := []string{podOf(gone, "run"), podOf(gone, "session")}
	if err := dead.Release(); err != nil {
		t.Fatal(err)
	}
	mine := podOf(live.Owner(), "run")
	n, err := live.ReapOrphans(ctx)
	if err != nil || n != len(left) {
		t.Fatalf("reaped %d, %v; want %d", n, err, len(left))
	}
	for _, name := range left {
		if p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err == nil && p.DeletionTimestamp == nil {
			t.Errorf("the gone owner's pod %s is still there", name)
		}
	}
	if _, err := cs.CoreV1().Pods(ns).Get(ctx, mine, metav1.GetOptions{}); err != nil {
		t.Errorf("the live owner's pod: %v", err)
	}
	if err := b.Remove(ctx, mine); err != nil {
		t.Error(err)
	}
}

// TestReapFinished: pods that ended more than half a minute ago (their
// server was killed: their runners ended with its attach streams) are
// deleted by any pybox on the namespace, at its start and from its
// reaper's tick, whoever created them; pods that just ended (their server
// is reading or deleting them), running or pending ones stay.
func TestReapFinished(t *testing.T) {
	c := cluster(t)
	cs, ns, b := backendIn(t, c, kube.Config{})
	ctx := t.Context()
	ended := func(phase corev1.PodPhase, ago time.Duration) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			at := metav1.NewTime(time.Now().Add(-ago))
			p.Status.Phase = phase
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: kube.ContainerName, Image: "img", ImageID: "img",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, StartedAt: at, FinishedAt: at}}}}
		}
	}
	running := func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: kube.ContainerName, Image: "img", ImageID: "img", Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now().Add(-time.Hour))}}}}
	}
	cases := []struct {
		name   string
		status func(*corev1.Pod)
		reaped bool
	}{
		{"pybox-run-gone-succeeded", ended(corev1.PodSucceeded, 2*time.Minute), true},
		{"pybox-run-gone-failed", ended(corev1.PodFailed, time.Hour), true},
		{"pybox-run-just-ended", ended(corev1.PodSucceeded, 0), false},
		{"pybox-session-running", running, false},
		{"pybox-pool-pending", nil, false},
	}
	for _, tc := range cases {
		spec := runSpec(tc.name, "")
		spec.Config.Labels = map[string]string{sandbox.LabelManaged: "true", sandbox.LabelOwner: "someone-else"}
		p, err := b.Create(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		if tc.status != nil {
			tc.status(p)
			if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	sb, err := sandbox.New(sandbox.Config{Backend: sandbox.Kubernetes(b), WarmPool: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	n, err := sb.ReapOrphans(ctx)
	if err != nil || n != 2 {
		t.Errorf("reaped %d, %v; want 2", n, err)
	}
	for _, tc := range cases {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, tc.name, metav1.GetOptions{})
		if gone := err != nil || p.DeletionTimestamp != nil; gone != tc.reaped {
			t.Errorf("pod %s: deleted %v; want %v", tc.name, gone, tc.reaped)
		}
		if !tc.reaped {
			b.Remove(ctx, tc.name)
		}
	}
}

// token asks the API server for a token of ServiceAccount name.
func token(t *testing.T, cs kubernetes.Interface, ns, name string) string {
	t.Helper()
	tok, err := testenv.Token(t.Context(), cs, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func ptr[T any](v T) *T { return &v }

func hostMount(src, dst string) mount.Mount {
	return mount.Mount{Type: mount.TypeBind, Source: src, Target: dst}
}
