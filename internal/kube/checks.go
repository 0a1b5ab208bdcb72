package kube

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/pybox-dev/pybox/internal/contract"
	"github.com/pybox-dev/pybox/internal/engine"
)

// The checks pybox makes of a cluster at start (CheckCluster), by name:
// the names an operator lists to accept a cluster that fails them.
const (
	CheckNetworkPolicy = "networkpolicy" // the deny-all NetworkPolicy stops a connection between two pybox pods
	CheckPids          = "pids"          // a pod cannot start processes without bound
)

// checkTimeout bounds the whole check: two pods started, one connection
// tried, a few thousand threads started.
const checkTimeout = 2 * time.Minute

// checkThreads is how many threads the pids probe starts when its cgroup
// shows no bound: a pod that can start them all has no bound below it.
const checkThreads = 4200

// Checks is what CheckCluster found.
type Checks struct {
	NetworkPolicy bool   // the probe's connection was stopped
	Network       string // what the probe saw: "connected", or how it failed
	PidsBounded   bool
	Pids          string // the bound: "pids.max N", "N threads", or "none up to N threads"
	Err           error  // the probe itself failed: neither is known
}

// Failed names the checks the cluster failed (every one when the probe
// itself failed).
func (c Checks) Failed() []string {
	var out []string
	if c.Err != nil || !c.NetworkPolicy {
		out = append(out, CheckNetworkPolicy)
	}
	if c.Err != nil || !c.PidsBounded {
		out = append(out, CheckPids)
	}
	return out
}

// ProbeImage is what the check's pods run: pybox's runtime image (any
// image with contract.VenvPython) under the sandboxes' RuntimeClass
// ("" = the cluster's default), so they find what sandboxes get.
type ProbeImage struct {
	Image, Runtime string
}

// Both programs end by themselves when pybox never speaks to them within
// a minute (it died before it could): nothing stays behind running.
//
// listenProgram listens and, once pybox speaks (what a container prints
// before the attach stream opens is lost), says its pod's address and
// waits (30 s at most) for the connection the deny-all policy should stop.
const listenProgram = `
import select, socket, sys
if not select.select([0], [], [], 60)[0]:
    raise SystemExit("nobody spoke within 60 s")
sys.stdin.readline()
s = socket.socket()
s.bind(("0.0.0.0", 8080))
s.listen(4)
s.settimeout(30)
print(socket.gethostbyname(socket.gethostname()), flush=True)
try:
    s.accept()[0].close()
except OSError:
    pass
`

// connectProgram reads the listener's address, tries to connect (2 s),
// then finds its pids bound: its cgroup's pids.max, else how many
// threads it can start (up to checkThreads).
const connectProgram = `
import _thread, os, select, socket, sys
if not select.select([0], [], [], 60)[0]:
    raise SystemExit("nobody spoke within 60 s")
ip = sys.stdin.readline().strip()
try:
    socket.create_connection((ip, 8080), timeout=2).close()
    print("network connected", flush=True)
except OSError as e:
    print("network blocked", type(e).__name__, flush=True)
bound = "max"
for p in ("/sys/fs/cgroup/pids.max", "/sys/fs/cgroup/pids/pids.max"):
    try:
        bound = open(p).read().strip()
        break
    except OSError:
        pass
if bound == "max":
    _thread.stack_size(32768)
    stop, n = _thread.allocate_lock(), 0
    stop.acquire()
    try:
        for _ in range(THREADS):
            _thread.start_new_thread(stop.acquire, ())
            n += 1
    except RuntimeError:
        bound = "threads %d" % n
print("pids", bound, flush=True)
os._exit(0)
`

// CheckCluster finds whether the cluster enforces the deny-all
// NetworkPolicy and bounds a pod's processes: it starts a pair of pybox
// pods (labelled as sandboxes, so the policy selects them), one
// listening, one connecting to it and reading its pids bound. Both pods
// are deleted before it returns, whatever happened.
func (b *Backend) CheckCluster(ctx context.Context, img ProbeImage) Checks {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	id := make([]byte, 4)
	_, _ = rand.Read(id) // never fails (crypto/rand)
	name := "pybox-check-" + hex.EncodeToString(id)
	var listener, client *Attached
	var lerr, cerr error
	var wg sync.WaitGroup
	wg.Go(func() { listener, lerr = b.Start(ctx, probeSpec(name+"-listen", img, listenProgram)) })
	wg.Go(func() {
		client, cerr = b.Start(ctx, probeSpec(name+"-connect", img, strings.Replace(connectProgram, "THREADS", strconv.Itoa(checkThreads), 1)))
	})
	wg.Wait()
	var readers sync.WaitGroup
	defer func() {
		for _, a := range []*Attached{listener, client} {
			if a != nil {
				_ = a.Destroy(ctx) // a failed delete is retried by RemoveStrays
			}
		}
		readers.Wait() // their streams ended with the pods
	}()
	if err := errors.Join(lerr, cerr); err != nil {
		return Checks{Err: fmt.Errorf("start the probe pods: %w", err)}
	}
	if _, err := io.WriteString(listener, "go\n"); err != nil {
		return Checks{Err: fmt.Errorf("start the probe's listener: %w", err)}
	}
	lines := make(chan string, 8)
	readers.Go(func() { readLines(listener.Output(), lines, 1, "listener") })
	readers.Go(func() { readLines(client.Output(), lines, 2, "client") })
	return b.converse(ctx, client, lines)
}

// converse relays the listener's address to the client and reads what
// the client found.
func (b *Backend) converse(ctx context.Context, client *Attached, lines <-chan string) Checks {
	var c Checks
	for c.Network == "" || c.Pids == "" {
		var line string
		select {
		case line = <-lines:
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
				return Checks{Err: fmt.Errorf("the probe pods did not answer within %v", checkTimeout)}
			}
			return Checks{Err: context.Cause(ctx)}
		}
		field, rest, _ := strings.Cut(line, " ")
		switch field {
		case "network":
			c.Network = rest
			c.NetworkPolicy = !strings.HasPrefix(rest, "connected")
		case "pids":
			c.PidsBounded, c.Pids = pidsBound(rest)
		case "ended": // a probe pod ended before it said all it should (under gVisor, its memory limit stops its threads)
			c.Err = fmt.Errorf("the probe's %s pod ended before it reported all (network %q, pids %q)", rest, c.Network, c.Pids)
			return c
		default: // the listener's address: never loopback, where the client would reach itself
			if ip := net.ParseIP(line); ip == nil || ip.IsLoopback() {
				return Checks{Err: fmt.Errorf("the probe's listener gave no pod address: %q", line)}
			}
			if _, err := io.WriteString(client, line+"\n"); err != nil {
				return Checks{Err: fmt.Errorf("tell the probe pod the address: %w", err)}
			}
		}
	}
	return c
}

// pidsBound reads the probe's "pids" line: "N" (its cgroup's pids.max),
// "threads N" (it could start N threads only) or "max" (checkThreads
// started).
func pidsBound(s string) (bool, string) {
	if n, err := strconv.Atoi(s); err == nil {
		return true, "pids.max " + strconv.Itoa(n)
	}
	if n, ok := strings.CutPrefix(s, "threads "); ok {
		return true, n + " threads"
	}
	return false, fmt.Sprintf("none up to %d threads", checkThreads)
}

// readLines sends up to n lines of r.
// A stream that ends before its n lines sends "ended WHO" (out must
// have room for every reader's n+1 lines: converse may have returned).
func readLines(r io.Reader, out chan<- string, n int, who string) {
	sc := bufio.NewScanner(r)
	i := 0
	for ; i < n && sc.Scan(); i++ {
		out <- sc.Text()
	}
	if i < n {
		out <- "ended " + who
	}
	_, _ = io.Copy(io.Discard, r) // until the stream ends
}

// probeUser is the uid:gid of the check's pods: outside the sandboxes'
// range (contract.SandboxUIDBase, a uid each), since RLIMIT_NPROC counts
// every task of a uid on the node: the probe's threads never count
// against a sandbox running there.
const probeUser = "10003:10003"

// probeSpec is a check's pod: pybox's hardening, python running code.
func probeSpec(name string, img ProbeImage, code string) engine.Spec {
	cfg := &container.Config{
		Image: img.Image, User: probeUser, OpenStdin: true,
		Entrypoint: []string{contract.VenvPython, "-c", code},
		Env:        []string{"PATH=" + contract.Path},
		Labels:     map[string]string{contract.LabelRole: "probe"},
	}
	host := &container.HostConfig{
		CapDrop: []string{"ALL"}, SecurityOpt: []string{"no-new-privileges"}, ReadonlyRootfs: true,
		NetworkMode: "none", Runtime: img.Runtime,
		Resources: container.Resources{Memory: 256 << 20, NanoCPUs: 500_000_000},
	}
	return engine.Spec{Name: name, Config: cfg, Host: host}
}
