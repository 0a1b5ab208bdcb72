package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/pybox-dev/pybox/internal/engine"
)

// Attached is a running pod with the runner's channel attached.
type Attached struct {
	b         *Backend
	name      string
	inR, outR *io.PipeReader
	inW, outW *io.PipeWriter
	ctx       context.Context // ends the watch and the attach stream
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	done      chan struct{} // closed when the container has ended
	ended     chan struct{} // closed when the attach stream has ended
	exit      engine.Exit
	last      *corev1.Pod // the latest state seen, for errors
	lastMu    sync.Mutex
	once      sync.Once
	endedOnce sync.Once
	bound     chan struct{} // closed once the pod has a node
	boundOnce sync.Once
	runs      chan struct{} // closed once its status says the container runs
	runsOnce  sync.Once
	connected chan struct{}         // closed once the attach stream is open
	started   chan struct{}         // closed once the kubelet's event says it started the container
	noEvents  chan struct{}         // closed when the kubelet's events cannot be followed
	lastErr   atomic.Pointer[error] // the last refused attach, for errors
	attempts  atomic.Int32          // attach requests made
	lastTry   atomic.Int64          // when the last began (unix nanoseconds)
}

func (a *Attached) ContainerID() string         { return a.name }
func (a *Attached) Output() io.Reader           { return a.outR }
func (a *Attached) Write(p []byte) (int, error) { return a.inW.Write(p) }
func (a *Attached) Done() <-chan struct{}       { return a.done }
func (a *Attached) Exit() engine.Exit           { return a.exit }
func (a *Attached) Broken() bool                { return closed(a.ended) }

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// attach opens the attach stream as soon as it can, and copies it until
// it ends. It does not wait for the pod's status to say its container
// runs (the kubelet reports that at its next relist, up to a second
// later): it attaches over SPDY once the kubelet's event says it started
// the container, and tries again while the kubelet refuses because the
// container does not run yet (notRunningYet). Where the kubelet's events
// cannot be followed (the account may not watch them), it tries from the
// moment the pod is bound, every attachRetry. A refused SPDY upgrade has
// read nothing of stdin; over a websocket the API server accepts the
// stream before the kubelet answers, so a refusal there could have
// swallowed stdin. Where SPDY is not available (a proxy that only passes
// websockets), it waits for the status to say the container runs and
// attaches once, websocket first. connected is closed once a stream is
// open.
func (a *Attached) attach(stderr io.Writer) error {
	spdy, fallback, err := a.executors()
	if err != nil {
		return fmt.Errorf("attach to pod %s: %w", a.name, err)
	}
	a.wg.Go(func() {
		err := a.stream(spdy, fallback, stderr)
		if err == nil {
			err = io.EOF
		}
		a.lastErr.Store(&err)
		a.outW.CloseWithError(err)
		a.endedOnce.Do(func() { close(a.ended) })
	})
	return nil
}

// attachRetry spaces the attempts to attach to a container that does not
// run yet.
const attachRetry = 40 * time.Millisecond

// stream attaches (see attach) and returns once the stream it opened ends,
// or the pod or the Attached ends first.
func (a *Attached) stream(spdy, fallback remotecommand.Executor, stderr io.Writer) error {
	opts := remotecommand.StreamOptions{Stdin: &firstRead{r: a.inR, c: a.connected}, Stdout: a.outW, Stderr: stderr}
	if err := await(a, a.bound); err != nil {
		return err
	}
	for tries := 0; ; tries++ {
		if err := a.beforeAttach(tries); err != nil {
			return err
		}
		a.try()
		err := spdy.StreamWithContext(a.ctx, opts)
		if closed(a.connected) || a.ctx.Err() != nil {
			return err
		}
		if !notRunningYet(err) {
			a.b.log.Debug("attach over SPDY refused; attaching once the pod runs", "pod", a.name, "err", err)
			break
		}
		a.lastErr.Store(&err)
	}
	if err := await(a, a.runs); err != nil {
		return err
	}
	a.try()
	return fallback.StreamWithContext(a.ctx, opts)
}

// beforeAttach waits until an attach request is worth making, tries
// made already: until the kubelet's event says it started the container,
// or the pod's status says it runs, or (without the events) at once;
// after a refusal, attachRetry more.
func (a *Attached) beforeAttach(tries int) error {
	if !closed(a.started) && !closed(a.runs) && !closed(a.noEvents) {
		select {
		case <-a.started:
		case <-a.runs:
		case <-a.noEvents:
		case <-a.done:
			return fmt.Errorf("pod %s ended before pybox could attach", a.name)
		case <-a.ctx.Done():
			return context.Cause(a.ctx)
		}
		return nil
	}
	if tries == 0 {
		return nil
	}
	t := time.NewTimer(attachRetry)
	defer t.Stop()
	return await(a, t.C)
}

// followStarted closes started once the kubelet's event says it started
// the pod's container, and noEvents when its events cannot be followed
// (the watch refused, or ended first). It stops once the stream is open
// or the pod has ended.
func (a *Attached) followStarted(uid types.UID, rv string) {
	sel := fields.AndSelectors(fields.OneTermEqualSelector("involvedObject.uid", string(uid)), fields.OneTermEqualSelector("reason", "Started")).String()
	w, err := a.b.cs.CoreV1().Events(a.b.opts.Namespace).Watch(a.ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: rv})
	if err != nil {
		a.b.eventsRefused(err)
		close(a.noEvents)
		return
	}
	defer w.Stop()
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				close(a.noEvents)
				return
			}
			if e, isEvent := ev.Object.(*corev1.Event); isEvent && e.Reason == "Started" && e.InvolvedObject.FieldPath == "spec.containers{"+ContainerName+"}" {
				close(a.started)
				return
			}
		case <-a.connected:
			return
		case <-a.done:
			return
		case <-a.ctx.Done():
			return
		}
	}
}

// try counts an attach request about to be made.
func (a *Attached) try() {
	a.attempts.Add(1)
	a.lastTry.Store(time.Now().UnixNano())
}

// await waits for c, unless the pod or the Attached ends first.
func await[T any](a *Attached, c <-chan T) error {
	select {
	case <-c:
		return nil
	case <-a.done:
		return fmt.Errorf("pod %s ended before pybox could attach", a.name)
	case <-a.ctx.Done():
		return context.Cause(a.ctx)
	}
}

// notRunningYet: the kubelet refused an attach because the pod or its
// container does not run there yet.
func notRunningYet(err error) bool {
	if err == nil {
		return false
	}
	s := err.Error()
	return strings.Contains(s, "not found in pod") || strings.Contains(s, "container not found") || strings.Contains(s, "pod does not exist") ||
		strings.Contains(s, "not running") || strings.Contains(s, "does not have a host assigned")
}

// attachErr is why the last attach failed.
func (a *Attached) attachErr() error {
	if p := a.lastErr.Load(); p != nil {
		return *p
	}
	return errors.New("the attach stream ended: " + a.pending())
}

// executors are the attach executors for the pod's runner container: SPDY
// alone, and websocket falling back to SPDY.
func (a *Attached) executors() (spdy, fallback remotecommand.Executor, err error) {
	req := a.b.cs.CoreV1().RESTClient().Post().Namespace(a.b.opts.Namespace).Resource("pods").Name(a.name).SubResource("attach").
		VersionedParams(&corev1.PodAttachOptions{Container: ContainerName, Stdin: true, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	spdy, err = remotecommand.NewSPDYExecutor(a.b.rest, "POST", req.URL())
	if err != nil {
		return nil, nil, err
	}
	ws, err := remotecommand.NewWebSocketExecutor(a.b.rest, "GET", req.URL().String())
	if err != nil {
		return nil, nil, err
	}
	fallback, err = remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	return spdy, fallback, err
}

// firstRead is the runner's stdin as the attach stream reads it: the
// stream's first read of it (which happens once the stream is open)
// closes c.
type firstRead struct {
	r    io.Reader
	c    chan struct{}
	once sync.Once
}

func (f *firstRead) Read(p []byte) (int, error) {
	f.once.Do(func() { close(f.c) })
	return f.r.Read(p)
}

func (f *firstRead) read() bool { return closed(f.c) }

// follow watches the pod: it reports on running when its container runs
// (or an error when it cannot), then closes done with its exit.
func (a *Attached) follow(rv string, running chan<- error) {
	defer a.endedOnce.Do(func() { close(a.ended) })
	pods := a.b.cs.CoreV1().Pods(a.b.opts.Namespace)
	told := false
	tell := func(err error) {
		if !told {
			told = true
			running <- err
		}
	}
	finish := func(x engine.Exit) {
		a.exit = x
		close(a.done)
	}
	for a.ctx.Err() == nil {
		w, err := pods.Watch(a.ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + a.name, ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			if a.ctx.Err() != nil {
				break
			}
			time.Sleep(time.Second) // the API server away, say: try again
			if p, gerr := pods.Get(a.ctx, a.name, metav1.GetOptions{}); gerr == nil {
				rv = p.ResourceVersion
			} else if apierrors.IsNotFound(gerr) {
				tell(fmt.Errorf("pod %s was deleted before it ran", a.name))
				finish(engine.Exit{Code: -1, Lost: true})
				return
			}
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				rv = "" // expired, say: the next watch starts from the pod's state now
				w.Stop()
				break
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			rv = p.ResourceVersion
			a.lastMu.Lock()
			a.last = p
			a.lastMu.Unlock()
			if p.Spec.NodeName != "" {
				a.boundOnce.Do(func() { close(a.bound) })
			}
			if ev.Type == watch.Deleted {
				w.Stop()
				tell(fmt.Errorf("pod %s was deleted before it ran", a.name))
				finish(engine.Exit{Code: 137})
				return
			}
			st := containerState(p)
			if why := startFailure(p, st); why != "" {
				w.Stop()
				tell(fmt.Errorf("pod %s cannot start: %s", a.name, why))
				finish(engine.Exit{Code: -1})
				return
			}
			if st != nil && st.Running != nil {
				a.runsOnce.Do(func() { close(a.runs) })
				tell(nil)
			}
			if st != nil && st.Terminated != nil {
				w.Stop()
				tell(fmt.Errorf("pod %s ended before pybox could attach (exit %d: %s)", a.name, st.Terminated.ExitCode, st.Terminated.Reason))
				finish(terminatedExit(st.Terminated))
				return
			}
		}
	}
	tell(context.Cause(a.ctx))
	finish(engine.Exit{Code: 137, Cancelled: true})
}

// terminatedExit is a terminated container's exit. An OOM kill is exit
// 137 (SIGKILL, what the OOM killer sends, as Docker reports it) whatever
// code the runtime gave: under gVisor the killed sandbox's container ends
// with 128.
func terminatedExit(st *corev1.ContainerStateTerminated) engine.Exit {
	exit := engine.Exit{Code: int(st.ExitCode), OOMKilled: st.Reason == "OOMKilled"}
	if exit.OOMKilled && exit.Code <= 128 {
		exit.Code = 137
	}
	return exit
}

func containerState(p *corev1.Pod) *corev1.ContainerState {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == ContainerName {
			return &s.State
		}
	}
	return nil
}

// startFailure says why a pod will not start, or "".
func startFailure(p *corev1.Pod, st *corev1.ContainerState) string {
	if st != nil && st.Waiting != nil {
		switch st.Waiting.Reason {
		case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
			return st.Waiting.Reason + ": " + st.Waiting.Message
		}
	}
	if p.Status.Phase == corev1.PodFailed && (st == nil || st.Terminated == nil) {
		return "the pod failed: " + p.Status.Reason + " " + p.Status.Message
	}
	return ""
}

// pending describes why the pod is not running yet.
func (a *Attached) pending() string {
	a.lastMu.Lock()
	p := a.last
	a.lastMu.Unlock()
	if p == nil {
		return "no status yet"
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "phase %s", p.Status.Phase)
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			fmt.Fprintf(&b, "; %s: %s", c.Reason, c.Message)
		}
	}
	if st := containerState(p); st != nil && st.Waiting != nil {
		fmt.Fprintf(&b, "; %s %s", st.Waiting.Reason, st.Waiting.Message)
	}
	return b.String()
}

// Destroy deletes the pod and waits for the watch and the stream. It is
// idempotent.
func (a *Attached) Destroy(ctx context.Context) error {
	var err error
	a.once.Do(func() {
		err = a.b.Remove(ctx, a.name)
		if a.inW != nil {
			a.inW.CloseWithError(io.ErrClosedPipe)
			a.outR.CloseWithError(io.ErrClosedPipe)
		}
		a.cancel()
		a.wg.Wait()
	})
	return err
}
