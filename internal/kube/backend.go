// Package kube is pybox's Kubernetes backend: every container the sandbox
// asks for (a stateless run, a warm-pool entry, a session, a probe) is a
// Pod built from the same container contract (PodFor), and the runner's
// private channel is the pod attach API's stdin and stdout streams, never
// the network. Pods are labelled for ownership and reaping like Docker
// containers, name the server's own pod as their owner when it runs in the
// cluster, and are selected by a deny-all NetworkPolicy the backend keeps.
package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/pybox-dev/pybox/internal/contract"
	"github.com/pybox-dev/pybox/internal/engine"
)

// NetworkPolicyName is the deny-all policy that selects every pybox pod.
const NetworkPolicyName = "pybox-sandboxes-deny-all"

// Timeouts of the cluster's bookkeeping.
const (
	startTimeout    = 3 * time.Minute  // a pod scheduled, its image there, its container running
	teardownTimeout = 30 * time.Second // a delete answered
)

// ErrUnreachable: the API server did not answer.
var ErrUnreachable = errors.New("the Kubernetes API server is not reachable")

// Config configures the backend.
type Config struct {
	// Kubeconfig is the kubeconfig file; "" = the in-cluster config when
	// pybox runs in a pod, else $KUBECONFIG or ~/.kube/config.
	Kubeconfig string
	Namespace  string // where the pods go; "" = the kubeconfig's, or "default"
	// WorkspaceBytes sizes a session's workspace emptyDir (see PodOptions).
	WorkspaceBytes int64
	// OwnerPod, OwnerUID and OwnerNamespace name the pod pybox runs in
	// (from the downward API; the namespace "" = the in-cluster one); when
	// set, sandbox pods in that same namespace are its dependents (an owner
	// in another namespace would count as absent: the garbage collector
	// would delete them).
	OwnerPod, OwnerUID, OwnerNamespace string
	// RuntimeClass is the RuntimeClass the pods name (PYBOX_RUNTIME); it
	// must exist. "": the cluster's default runtime.
	RuntimeClass string
	Log          *slog.Logger
}

// Backend runs pybox's containers as pods. Create it with New.
type Backend struct {
	cs   kubernetes.Interface
	rest *rest.Config
	opts PodOptions
	log  *slog.Logger

	mu       sync.Mutex
	strays   map[string]bool // pods whose deletion failed: RemoveStrays tries again
	noEvents sync.Once       // logs once that the kubelet's events cannot be watched
	lastReap time.Time       // the last look for orphaned pods (ReapOrphansEvery)
}

// New connects to the cluster, checks that pybox may manage pods in the
// namespace, and makes sure the deny-all NetworkPolicy exists.
func New(ctx context.Context, cfg Config) (*Backend, error) {
	rc, ns, err := restConfig(cfg.Kubeconfig)
	if err != nil {
		return nil, err
	}
	if cfg.Namespace != "" {
		ns = cfg.Namespace
	}
	rc.QPS, rc.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return NewWith(ctx, cs, rc, cfg, ns)
}

// NewWith is New over a given client and its REST config.
func NewWith(ctx context.Context, cs kubernetes.Interface, rc *rest.Config, cfg Config, ns string) (*Backend, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	b := &Backend{cs: cs, rest: rc, log: cfg.Log, strays: map[string]bool{},
		opts: PodOptions{Namespace: ns, WorkspaceBytes: cfg.WorkspaceBytes}}
	if cfg.OwnerPod != "" && cfg.OwnerUID != "" {
		if ons := ownerNamespace(cfg.OwnerNamespace); ons == "" || ons == ns {
			b.opts.Owner = &metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: cfg.OwnerPod, UID: types.UID(cfg.OwnerUID)}
		} else {
			b.log.Info("sandbox pods are not dependents of the server's pod: it runs in another namespace", "server_namespace", ons, "namespace", ns)
		}
	}
	if _, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1, LabelSelector: contract.LabelManaged + "=true"}); err != nil {
		return nil, b.explain("list pods", err)
	}
	if err := checkRuntimeClass(ctx, cs, cfg.RuntimeClass); err != nil {
		return nil, err
	}
	if err := b.ensurePolicy(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

// Namespace is where the backend's pods go.
func (b *Backend) Namespace() string { return b.opts.Namespace }

func restConfig(kubeconfig string) (*rest.Config, string, error) {
	if kubeconfig == "" {
		if rc, err := rest.InClusterConfig(); err == nil {
			ns := "default"
			if b, err := readNamespaceFile(); err == nil {
				ns = b
			}
			return rc, ns, nil
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	rc, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("kubernetes: no usable kubeconfig (set KUBECONFIG, or run pybox in a pod): %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil || ns == "" {
		ns = "default"
	}
	return rc, ns, nil
}

// ensurePolicy creates the deny-all NetworkPolicy for pybox's pods: no
// ingress, no egress (the cluster's network plugin must enforce
// NetworkPolicies for it to hold).
func (b *Backend) ensurePolicy(ctx context.Context) error {
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: NetworkPolicyName, Namespace: b.opts.Namespace, Labels: map[string]string{"app.kubernetes.io/managed-by": "pybox"}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{contract.LabelManaged: "true"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
	_, err := b.cs.NetworkingV1().NetworkPolicies(b.opts.Namespace).Create(ctx, np, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return b.explain("create the deny-all NetworkPolicy", err)
	}
	return nil
}

// explain turns API errors into ones that say what to do.
func (b *Backend) explain(what string, err error) error {
	var ue *url.Error
	var ne net.Error
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("kubernetes: %s in namespace %q: forbidden (pybox's account needs the Role in cmd/pybox/kubernetes): %w", what, b.opts.Namespace, err)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("kubernetes: %s: unauthorized (check the kubeconfig's credentials): %w", what, err)
	case apierrors.IsNotFound(err) && strings.Contains(err.Error(), "namespaces"):
		return fmt.Errorf("kubernetes: %s: namespace %q does not exist: %w", what, b.opts.Namespace, err)
	case errors.As(err, &ue), errors.As(err, &ne):
		return fmt.Errorf("%w (%s): %w", ErrUnreachable, what, err)
	}
	return fmt.Errorf("kubernetes: %s: %w", what, err)
}

// Create only creates spec's pod; the caller owns its deletion. The
// request is detached from ctx (an abandoned one may still create it): if
// ctx ended meanwhile the pod is deleted again.
func (b *Backend) Create(ctx context.Context, spec engine.Spec) (*corev1.Pod, error) {
	pod, err := PodFor(spec, b.opts)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	created, err := b.cs.CoreV1().Pods(b.opts.Namespace).Create(cctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, b.explain("create pod", err)
	}
	if ctx.Err() != nil {
		b.Remove(ctx, created.Name)
		return nil, context.Cause(ctx)
	}
	return created, nil
}

// Start creates spec's pod, waits for its container to run and attaches
// to its stdin, stdout and stderr.
func (b *Backend) Start(ctx context.Context, spec engine.Spec) (*Attached, error) {
	pod, err := b.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	a, running := b.watch(pod, true)
	a.inR, a.inW = io.Pipe()
	a.outR, a.outW = io.Pipe()
	err = a.attach(orDiscard(spec.Stderr))
	if err == nil {
		err = a.waitConnected(ctx, running)
	}
	if err != nil {
		a.Destroy(ctx)
		return nil, err
	}
	return a, nil
}

// waitConnected waits for the attach stream to open, or for the pod to
// fail to start, within startTimeout.
func (a *Attached) waitConnected(ctx context.Context, running <-chan error) error {
	wait, stop := context.WithTimeout(ctx, startTimeout)
	defer stop()
	for {
		select {
		case <-a.connected:
			return nil
		case err := <-running:
			if err != nil && !closed(a.connected) {
				return err
			}
			running = nil // it runs: the stream opens next
		case <-a.ended:
			if closed(a.connected) {
				return nil
			}
			select {
			case err := <-running: // why the pod ended says more than the refused attach
				if err != nil {
					return err
				}
			default:
			}
			return fmt.Errorf("attach to pod %s: %w", a.name, a.attachErr())
		case <-wait.Done():
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return fmt.Errorf("pod %s did not start within %v: %s", a.name, startTimeout, a.pending())
		}
	}
}

// Run runs spec's pod to completion (probes: no stdin) and deletes it;
// its log goes to spec.Stdout when it exits 0, else to spec.Stderr.
func (b *Backend) Run(ctx context.Context, spec engine.Spec) (engine.Exit, error) {
	cfg := *spec.Config // the caller's stays as it is
	cfg.OpenStdin = false
	spec.Config = &cfg
	pod, err := b.Create(ctx, spec)
	if err != nil {
		return engine.Exit{}, err
	}
	defer b.Remove(ctx, pod.Name)
	a, _ := b.watch(pod, false)
	defer func() { a.cancel(); a.wg.Wait() }()
	start := time.Now()
	var deadline <-chan time.Time
	if spec.Timeout > 0 {
		t := time.NewTimer(spec.Timeout)
		defer t.Stop()
		deadline = t.C
	}
	select {
	case <-a.done:
	case <-deadline:
		return engine.Exit{Code: 137, TimedOut: true, Duration: time.Since(start)}, nil
	case <-ctx.Done():
		return engine.Exit{Code: 137, Cancelled: true, Duration: time.Since(start)}, context.Cause(ctx)
	}
	exit := a.Exit()
	exit.Duration = time.Since(start)
	// Streamed into the caller's writer, which keeps what it can hold:
	// never the whole log in memory.
	logs, err := b.cs.CoreV1().Pods(b.opts.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: ContainerName}).Stream(ctx)
	if err != nil {
		return exit, b.explain("read the pod's log", err)
	}
	defer logs.Close()
	w := spec.Stdout
	if exit.Code != 0 {
		w = spec.Stderr
	}
	if _, err := io.Copy(orDiscard(w), logs); err != nil {
		return exit, b.explain("read the pod's log", err)
	}
	return exit, nil
}

// watch starts following pod's state (see follow), and, to attach, the
// kubelet's event that it started the container (followStarted); running
// gets the first answer: nil once its container runs, else why it cannot.
func (b *Backend) watch(pod *corev1.Pod, attach bool) (a *Attached, running <-chan error) {
	a = &Attached{b: b, name: pod.Name, done: make(chan struct{}), ended: make(chan struct{}), bound: make(chan struct{}), runs: make(chan struct{}),
		connected: make(chan struct{}), started: make(chan struct{}), noEvents: make(chan struct{})}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	ch := make(chan error, 1)
	a.wg.Go(func() { a.follow(pod.ResourceVersion, ch) })
	if attach {
		a.wg.Go(func() { a.followStarted(pod.UID, pod.ResourceVersion) })
	}
	return a, ch
}

// eventsRefused logs, once, that the kubelet's events cannot be watched:
// attaching then polls from the moment a pod is bound.
func (b *Backend) eventsRefused(err error) {
	b.noEvents.Do(func() {
		b.log.Info("kubernetes: cannot watch the sandboxes' events (the Role in cmd/pybox/kubernetes allows it): pods are attached by polling, which costs the API server and the kubelet more", "err", err)
	})
}

// List returns pybox's pods carrying every label. Values Kubernetes does
// not accept as labels were stored as annotations (splitLabels).
func (b *Backend) List(ctx context.Context, want map[string]string) ([]engine.Summary, error) {
	sel, rest := splitLabels(want)
	list, err := b.cs.CoreV1().Pods(b.opts.Namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(sel).String()})
	if err != nil {
		return nil, b.explain("list pods", err)
	}
	var out []engine.Summary
	for _, p := range list.Items {
		all := maps.Clone(p.Labels)
		maps.Copy(all, p.Annotations)
		if !matches(all, rest) {
			continue
		}
		out = append(out, engine.Summary{ID: p.Name, Name: p.Name, State: strings.ToLower(string(p.Status.Phase)), Labels: all})
	}
	return out, nil
}

func matches(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// Remove deletes a pod at once (no grace period); one already gone counts
// as removed. It runs on a detached context so a cancelled caller cannot leak.
func (b *Backend) Remove(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	err := b.cs.CoreV1().Pods(b.opts.Namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil && !apierrors.IsNotFound(err) {
		b.strays[name] = true
		return b.explain("delete pod "+name, err)
	}
	delete(b.strays, name)
	return nil
}

// RemoveStrays tries again to delete the pods whose deletion failed and
// returns how many are still left.
func (b *Backend) RemoveStrays(ctx context.Context) int {
	b.mu.Lock()
	names := slices.Collect(maps.Keys(b.strays))
	b.mu.Unlock()
	for _, n := range names {
		_ = b.Remove(ctx, n)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.strays)
}

// ownerNamespace is the namespace of the server's pod: ns, else the
// in-cluster one, else "" (unknown).
func ownerNamespace(ns string) string {
	if ns != "" {
		return ns
	}
	own, _ := readNamespaceFile() // not in a pod: unknown
	return own
}

// readNamespaceFile is the namespace of the pod pybox runs in.
func readNamespaceFile() (string, error) {
	b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	return strings.TrimSpace(string(b)), err
}
