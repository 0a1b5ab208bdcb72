//go:build !windows

// The end-to-end tests drive the real binary against a daemon that shares
// this host's files and uids (Linux; they also build for macOS). On Windows
// the engine runs in Docker Desktop's virtual machine: they are not built
// there, and the Windows build's unit tests run in CI under Wine.

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/internal/engine"
	"github.com/pybox-dev/pybox/internal/testenv"
	"github.com/pybox-dev/pybox/tools"
)

// pyboxBin is the binary under test, built once by TestMain.
var pyboxBin string

func TestMain(m *testing.M) {
	flag.Parse()
	raiseParallel(longTests)
	dir, err := os.MkdirTemp("", "pybox-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pyboxBin = filepath.Join(dir, "pybox")
	// The servers under test measure their owners' folders (the meter) unless
	// a test asks for the filesystem mode (PYBOX_QUOTA_MODE=filesystem, which
	// loop-mounts an image per owner: see e2e_quotafs_test.go).
	if os.Getenv("PYBOX_QUOTA_MODE") == "" {
		os.Setenv("PYBOX_QUOTA_MODE", "meter")
	}
	build := []string{"build", "-o", pyboxBin}
	if os.Getenv("PYBOX_E2E_RACE") != "" { // the binary under test with the race detector
		build = append(build, "-race")
	}
	if out, err := exec.Command("go", append(build, ".")...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building pybox: %v\n%s", err, out)
		os.Exit(1)
	}
	// A suite killed midway (its machine stopped, say) leaves its servers'
	// containers behind; they are not this run's to answer for.
	if n := len(leftovers(true)); n > 0 {
		fmt.Fprintf(os.Stderr, "removed %d containers left by an earlier, interrupted test run\n", n)
	}
	code := m.Run()
	stopKube() // the Kubernetes tests' shared cluster, if one started (kubeTest)
	if code == 0 {
		code = checkNoLeftovers()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// longTests is how many parallel tests (parallelTest) run at once, unless
// -parallel says otherwise: more than this machine's two cores, because
// they wait on containers, timers and a test node more than they compute.
const longTests = 4

// runSlots holds one token per parallel test running (parallelTest):
// longTests, or -parallel's value when the command line sets it.
var runSlots chan struct{}

// longSlots holds one token per long test running (longTest): a
// Kubernetes node's, a soak's. They wait on pods, nodes and timers for
// minutes more than they compute, so they take no run slot and start as
// soon as the parallel tests are released: one that got a run slot last
// ran on alone at the end, the machine idle beside it (a two-minute tail).
var longSlots = make(chan struct{}, longTestsAtOnce)

// longTestsAtOnce bounds the long tests running beside the others (the
// soaks, the Kubernetes ones: kubeTest).
const longTestsAtOnce = 3

// raiseParallel makes runSlots, n tokens unless -parallel is set. When it
// is not, go test's own bound (-parallel) is lifted, so that the tests
// waiting for the layer-cache lock (layerTest) hold no place of the n.
func raiseParallel(n int) {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if set {
		n, _ = strconv.Atoi(flag.Lookup("test.parallel").Value.String())
	} else {
		flag.Set("test.parallel", "1000")
	}
	runSlots = make(chan struct{}, max(n, 1))
}

// server is a running `pybox serve` with a connected MCP client.
type server struct {
	t       *testing.T
	cs      *mcp.ClientSession
	cmd     *exec.Cmd
	storage string
	state   string // PYBOX_STATE_DIR, unless the caller passed its own
	eng     *engine.Client
	stderr  *testenv.LogBuffer
	labels  map[string]string // which containers are this server's; nil: its pid label
	killed  bool              // by the test, on purpose: its session cannot close cleanly
	closed  bool              // close ran (a test may close before its cleanup does)
	layers  *testenv.Layers   // the test's hold on the layer cache (packageServer)
}

// serverRuntimes maps each subtest eachRuntime made (by name) to its OCI
// runtime; serverRuntime looks a test up there.
var serverRuntimes sync.Map

// serverRuntime is the OCI runtime the servers t starts use ("" = the
// daemon's default): the runtime of the innermost eachRuntime subtest that
// t is, or is under. Per test, so that tests run in parallel never see
// another's.
func serverRuntime(t testing.TB) string {
	rt, _ := lookUp(&serverRuntimes, t).(string)
	return rt
}

// serverEnvs maps each subtest eachKubeRuntime made to more environment
// for the servers started in it (a test node's), before the test's own.
var serverEnvs sync.Map

func serverEnv(t testing.TB) []string {
	env, _ := lookUp(&serverEnvs, t).([]string)
	return env
}

// lookUp is m's value for t or the nearest test t is under, or nil.
func lookUp(m *sync.Map, t testing.TB) any {
	for name := t.Name(); ; {
		if v, ok := m.Load(name); ok {
			return v
		}
		i := strings.LastIndex(name, "/")
		if i < 0 {
			return nil
		}
		name = name[:i]
	}
}

// eachRuntime runs f as a subtest under each runtime of testenv.Runtimes
// (runc, and gVisor's runsc when the daemon has it): servers started in it
// run their sandboxes under that runtime.
func eachRuntime(t *testing.T, f func(t *testing.T)) {
	for _, rt := range testenv.Runtimes(t, testenv.Docker(t)) {
		t.Run(testenv.RuntimeName(rt), func(t *testing.T) {
			serverRuntimes.Store(t.Name(), rt)
			t.Cleanup(func() { serverRuntimes.Delete(t.Name()) }) // after f's parallel subtests too
			f(t)
		})
	}
}

// longTest marks t as one of the long end-to-end tests (minutes, waiting
// mostly on containers, timers or a test node more than on the CPU). It
// runs in parallel as a parallelTest does, under the same rules, but in a
// slot of its own (longSlots), beside the parallel tests' slots.
func longTest(t *testing.T) {
	t.Parallel()
	longSlots <- struct{}{}
	t.Cleanup(func() { <-longSlots }) // first registered: runs after the test's own cleanups
}

// parallelTest marks t as an end-to-end test that runs in parallel with the
// other parallel tests (longTests at once, see runSlots), after the
// package's serial tests: its servers, folders and containers are its own.
// A parallel test changes nothing that other tests see: no daemon-wide
// setting, fixed name or port, variable of this process's environment or
// package layer (it takes no testenv.LockLayerCache: a test that does is a
// layerTest), and it does not count or remove what it did not make. Nor does it bound a wall time tightly: beside the others
// an action takes longer.
func parallelTest(t *testing.T) {
	t.Parallel()
	runSlots <- struct{}{}
	t.Cleanup(func() { <-runSlots }) // first registered: runs after the test's own cleanups
}

// layerTest marks t as a parallel test that holds the layer-cache lock
// (testenv.LockLayerCache) from there to its end: it installs packages.
// Such tests run one at a time (the lock's holder), beside the parallel
// tests and in no place of theirs (runSlots): one waiting for the lock
// holds nothing another needs. prepare runs first, in a run slot and
// without the lock: what needs none, such as building the test's own
// images (testenv.BuildImage, under this process's own tags).
func layerTest(t *testing.T, prepare ...func()) {
	t.Parallel()
	if len(prepare) > 0 {
		func() {
			runSlots <- struct{}{}
			defer func() { <-runSlots }() // also when f fails t
			for _, f := range prepare {
				f()
			}
		}()
	}
	testenv.LockLayerCache(t, testenv.Docker(t))
}

// startServer starts the real binary over stdio with extra environment
// variables and connects the MCP Go SDK client to it. At cleanup it closes
// the session and checks that no container of this server is left.
func startServer(t *testing.T, env ...string) *server {
	t.Helper()
	return startServerWith(t, nil, env...)
}

// startServerWith is startServer with client options (notification handlers).
func startServerWith(t *testing.T, opts *mcp.ClientOptions, env ...string) *server {
	t.Helper()
	return launch(t, opts, exec.Command(pyboxBin, "serve"), env...)
}

// launch starts cmd (a `pybox serve`, perhaps wrapped) as startServerWith does.
func launch(t *testing.T, opts *mcp.ClientOptions, cmd *exec.Cmd, env ...string) *server {
	t.Helper()
	eng := testenv.Docker(t)
	testenv.RuntimeImage(t, eng, "base")
	s := &server{t: t, storage: t.TempDir(), state: t.TempDir(), eng: eng, stderr: &testenv.LogBuffer{}, cmd: cmd}
	// Later entries win, so a caller can pass its own storage or state dir.
	defaults := []string{"CODE_STORAGE_DIR=" + s.storage, "PYBOX_STATE_DIR=" + s.state, "PYBOX_BUILD=never"}
	if rt := serverRuntime(t); rt != "" {
		defaults = append(defaults, "PYBOX_RUNTIME="+rt)
	}
	defaults = append(defaults, serverEnv(t)...)
	s.cmd.Env = append(append(os.Environ(), defaults...), env...)
	s.cmd.Stderr = s.stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "pybox-e2e", Version: "test"}, opts)
	// At close the server removes its containers before it exits: on a
	// loaded daemon that can take longer than the SDK's default 5 s before
	// SIGTERM (and 5 more before SIGKILL, which leaves them behind).
	tr := &mcp.CommandTransport{Command: s.cmd, TerminateDuration: 30 * time.Second}
	cs, err := client.Connect(t.Context(), tr, nil)
	if err != nil {
		t.Fatalf("connect to pybox serve: %v\nstderr:\n%s", err, s.stderr)
	}
	s.cs = cs
	t.Cleanup(s.close)
	return s
}

func (s *server) close() {
	if s.closed {
		return
	}
	s.closed = true
	if err := s.cs.Close(); err != nil && !s.killed {
		s.t.Errorf("closing the session: %v", err)
	}
	if left := s.containers(); len(left) > 0 {
		s.t.Errorf("containers left behind by the server: %v", left)
	}
	if s.t.Failed() {
		s.t.Logf("server stderr:\n%s", s.stderr)
	}
}

// containers lists the pybox containers this server process owns now.
func (s *server) containers() []engine.Summary {
	if s.labels != nil {
		return testenv.Managed(s.t, s.eng, s.labels)
	}
	return testenv.Managed(s.t, s.eng, map[string]string{"pybox.pid": strconv.Itoa(s.cmd.Process.Pid)})
}

// container returns this server's container whose ID starts with prefix, or nil.
func (s *server) container(prefix string) *engine.Summary {
	for _, c := range s.containers() {
		if strings.HasPrefix(c.ID, prefix) {
			return &c
		}
	}
	return nil
}

// call invokes a tool and fails the test on a protocol error.
func (s *server) call(name string, args map[string]any) *mcp.CallToolResult {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.t.Context(), 3*time.Minute)
	defer cancel()
	res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		s.t.Fatalf("call %s: %v", name, err)
	}
	return res
}

// exec runs code through execute_code and decodes the structured result.
func (s *server) exec(args map[string]any) (tools.ExecutionOutput, *mcp.CallToolResult) {
	s.t.Helper()
	res := s.call("execute_code", args)
	return decode[tools.ExecutionOutput](s.t, res), res
}

// decode re-marshals a result's structured content into T.
func decode[T any](t *testing.T, res *mcp.CallToolResult) T {
	t.Helper()
	var out T
	if res.StructuredContent == nil {
		t.Fatalf("no structured content; content: %s", text(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil {
		t.Fatalf("decode structured content: %v", err)
	}
	return out
}

func callParams(name string, args map[string]any) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: name, Arguments: args}
}

// checkNoLeftovers fails the suite if any pybox container on this host
// belongs to a process that no longer runs (every server here has exited).
func checkNoLeftovers() int {
	left := leftovers(false)
	for _, c := range left {
		fmt.Fprintf(os.Stderr, "leftover container after the suite: %s %v\n", c.Name, c.Labels)
	}
	if len(left) > 0 {
		return 1
	}
	return 0
}

// leftovers lists the pybox containers on this host whose server process
// no longer runs, removing them when remove is set.
func leftovers(remove bool) []engine.Summary {
	eng, err := engine.New(nil)
	if err != nil {
		return nil
	}
	defer eng.Close()
	list, err := eng.List(context.Background(), map[string]string{"pybox.managed": "true"})
	if err != nil {
		return nil // no daemon: the Docker tests already skipped or failed
	}
	host, _ := os.Hostname()
	var left []engine.Summary
	for _, c := range list {
		pid, _ := strconv.Atoi(c.Labels["pybox.pid"])
		if c.Labels["pybox.host"] != host || pid <= 0 || syscall.Kill(pid, 0) == nil {
			continue
		}
		left = append(left, c)
		if remove {
			if err := eng.Remove(context.Background(), c.ID); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		}
	}
	return left
}

// hostWatch guards host files an attack must leave alone: a file in a
// directory outside code storage (Target, which attacks aim at), plus
// snapshots of /etc/passwd and of any extra paths.
type hostWatch struct {
	t       *testing.T
	Outside string
	Target  string
	before  map[string][]byte // nil value: the file did not exist
}

const watchedContent = "host file: do not touch\n"

func watchHost(t *testing.T, targetName string, extra ...string) *hostWatch {
	t.Helper()
	w := &hostWatch{t: t, Outside: t.TempDir(), before: map[string][]byte{}}
	w.Target = filepath.Join(w.Outside, targetName)
	if err := os.WriteFile(w.Target, []byte(watchedContent), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range append([]string{"/etc/passwd", w.Target}, extra...) {
		b, err := os.ReadFile(p)
		if err != nil {
			b = nil
		}
		w.before[p] = b
	}
	return w
}

// check fails the test if a watched file changed, appeared or vanished,
// or anything was added next to the target.
func (w *hostWatch) check() {
	w.t.Helper()
	for p, want := range w.before {
		got, err := os.ReadFile(p)
		if (err == nil) != (want != nil) || !bytes.Equal(got, want) {
			w.t.Errorf("host file %s changed: %q, %v", p, got, err)
		}
	}
	if entries, _ := os.ReadDir(w.Outside); len(entries) != 1 {
		w.t.Errorf("the outside directory holds %d entries, want 1 (no temp files)", len(entries))
	}
}
