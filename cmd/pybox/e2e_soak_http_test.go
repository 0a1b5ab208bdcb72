//go:build !windows

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/internal/testenv"
)

// The soak's tenants: two well-behaved ones (a and b, from 127.0.0.1) and
// hostile ones, each from a loopback address of its own (tenants are on
// hosts of their own; per-client connection bounds are per address).
var soakHostile = []struct{ name, ip string }{
	{"hout", "127.0.0.11"}, {"hdisk", "127.0.0.12"}, {"hcode", "127.0.0.13"},
	{"hkern", "127.0.0.14"}, {"hsess", "127.0.0.15"},
}

func soakToken(name string) string { return "token-of-" + name + "-0123456789abcdef" }

// The soak server's bounds (smaller than the defaults, so that the floods
// reach them within seconds).
const (
	soakQuotaMiB     = 32
	soakMaxSessions  = 4  // live stateful sessions per tenant
	soakMCPSessions  = 8  // MCP sessions per tenant
	soakClientConns  = 32 // connections per client address
	soakIdleTimeout  = 3 * time.Second
	soakDefaultRange = 30 * time.Second
	// soakOvershootMiB is what a fast writer may add past the quota before
	// the meter stops it: TestWorkspaceQuotaStopsAProgramThatFillsIt's
	// bound (a tenant's quota covers all its folders together).
	soakOvershootMiB = 400
	soakTenantBound  = int64(soakQuotaMiB+soakOvershootMiB) << 20
)

// TestSoakHostileTenantsHTTP: hostile tenants flood the HTTP server with
// every kind of issue 20 at once (output floods; sparse outputs and disk
// filling to the quota, in code storage and in fresh sessions they close;
// code-mode call floods that never read a reply; inotify and pipe hogs;
// MCP session floods with big initialize bodies; many SDK sessions opened
// and closed; idle and slow-loris connections before authentication) while
// two well-behaved tenants call execute_code in a loop. The well-behaved
// calls all succeed with the right result, and the server's RSS,
// descriptors and threads, and the disk under code storage and the state
// dir, stay bounded. PYBOX_SOAK sets the length (CI: 30s; e.g. 10m).
func TestSoakHostileTenantsHTTP(t *testing.T) {
	longTest(t)
	testenv.SkipShort(t, "the Docker daemon") // before the build of the echo server
	length := soakDefaultRange
	if v := os.Getenv("PYBOX_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("PYBOX_SOAK=%q: want a duration such as 10m", v)
		}
		length = d
	}
	h := soakServer(t)
	pid := h.cmd.Process.Pid
	good := []*soakGood{{name: "a", token: tokenA}, {name: "b", token: tokenB}}
	for _, g := range good { // warm: the pool and the downstream started
		g.cs = h.connect(g.token)
		g.call(t, 0)
	}
	fds0, threads0, rss0 := procStats(t, pid)
	smp := &soakSampler{pid: pid, dirs: []string{h.storage, h.state}}
	ctx, stop := context.WithTimeout(t.Context(), length)
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() { smp.run(ctx, t) })
	hostile := &soakCounts{}
	for _, ht := range soakHostile {
		wg.Go(func() { hostileTenant(ctx, t, h, ht.name, ht.ip, hostile) })
	}
	wg.Go(func() { slowLoris(ctx, h, "127.0.0.21", hostile) })
	for _, g := range good {
		wg.Go(func() { g.loop(ctx, t) })
	}
	start := time.Now()
	wg.Wait()
	elapsed := time.Since(start).Round(time.Second)
	settled := waitSettled(t, pid, fds0, settleSlack)
	fds, threads, rss := procStats(t, pid)
	t.Logf("soak of %v; server before -> peak -> after:", elapsed)
	t.Logf("  RSS      %4d -> %4d -> %4d MiB", rss0>>10, smp.peakRSS.Load()>>10, rss>>10)
	t.Logf("  fds      %4d -> %4d -> %4d (settled: %v)", fds0, smp.peakFDs.Load(), fds, settled)
	t.Logf("  fds after, by kind: %v", fdKinds(t, pid))
	t.Logf("  threads  %4d -> %4d -> %4d", threads0, smp.peakThreads.Load(), threads)
	_, _, keptAlloc, keptApparent := smp.disk()
	t.Logf("  disk     allocated: peak %d MiB (storage + state dir), %d MiB at the end; peak of one tenant %d MiB (%s)",
		smp.peakDisk.Load()>>20, smp.lastDisk.Load()>>20, smp.peakTenant.Load()>>20, smp.tenant())
	t.Logf("           apparent (sparse files at their length): peak %d MiB; kept at the end per tenant: %v MiB", smp.peakApparent.Load()>>20, mib(keptApparent))
	t.Logf("  samples  %d; second half's peaks: RSS %d MiB, fds %d; first half's: RSS %d MiB, fds %d",
		smp.samples.Load(), smp.late[0].Load()>>10, smp.late[1].Load(), smp.early[0].Load()>>10, smp.early[1].Load())
	for _, g := range good {
		t.Logf("  well-behaved %s: %d calls, %d failures", g.name, g.calls, g.failures)
	}
	t.Logf("  hostile: %s", hostile)
	checkSoakBounds(t, smp, good, fds0, rss0, settled)
	checkKept(t, keptAlloc, keptApparent)
	for _, g := range good { // still served after the floods
		g.call(t, 1)
	}
}

// soakServer starts the HTTP server with the echo downstream, the soak's
// bounds, and the hostile tenants added to the tokens file (a reload).
func soakServer(t *testing.T) *httpServer {
	t.Helper()
	bin := echoServer(t)
	cfg := filepath.Join(t.TempDir(), "mcp_servers.json")
	b, _ := json.Marshal(map[string]any{"servers": map[string]any{"echo": map[string]any{"command": bin, "description": "test tools"}}})
	os.WriteFile(cfg, b, 0o644)
	h := startHTTP(t, false, "PYBOX_MCP_SERVERS="+cfg, "PYBOX_MCP_CALL_TIMEOUT=2s",
		fmt.Sprintf("PYBOX_WORKSPACE_QUOTA=%dm", soakQuotaMiB), "PYBOX_WARM_POOL=1", "PYBOX_MAX_CONCURRENT=2",
		fmt.Sprint("PYBOX_MAX_SESSIONS=", soakMaxSessions), fmt.Sprint("PYBOX_MAX_MCP_SESSIONS=", soakMCPSessions),
		fmt.Sprint("PYBOX_MAX_CONNECTIONS_PER_CLIENT=", soakClientConns), "PYBOX_HTTP_IDLE_TIMEOUT="+soakIdleTimeout.String())
	lines := "a " + tokenA + "\nb " + tokenB + "\n"
	for _, ht := range soakHostile {
		lines += ht.name + " " + soakToken(ht.name) + "\n"
	}
	if err := os.WriteFile(h.tokens, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	h.cmd.Process.Signal(syscall.SIGHUP)
	last := soakHostile[len(soakHostile)-1].name
	deadline := time.Now().Add(30 * time.Second)
	for code, _ := h.rawPost(soakToken(last), "", "", initializeBody); code != http.StatusOK; code, _ = h.rawPost(soakToken(last), "", "", initializeBody) {
		if time.Now().After(deadline) {
			t.Fatalf("the hostile tenants' tokens were not taken within 30 s of SIGHUP: HTTP %d", code)
		}
		time.Sleep(100 * time.Millisecond) // polling for the reload, bounded above
	}
	return h
}

// soakGood is a well-behaved tenant: execute_code in a loop, each result
// checked (a stateless sum, and every third call a code-mode echo).
type soakGood struct {
	name, token     string
	cs              *mcp.ClientSession
	calls, failures int
	errs            []string
}

func (g *soakGood) loop(ctx context.Context, t *testing.T) {
	for i := 1; ctx.Err() == nil; i++ {
		g.calls++
		if err := g.try(t.Context(), i); err != nil {
			if g.failures++; len(g.errs) < 5 {
				g.errs = append(g.errs, fmt.Sprintf("call %d at %s: %v", i, time.Now().Format(time.TimeOnly), err))
			}
		}
	}
}

// call runs one checked call and fails the test if it fails.
func (g *soakGood) call(t *testing.T, i int) {
	t.Helper()
	if err := g.try(t.Context(), i); err != nil {
		t.Fatalf("well-behaved tenant %s: %v", g.name, err)
	}
}

func (g *soakGood) try(ctx context.Context, i int) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	code, want := fmt.Sprintf("print(sum(range(%d)))", i*7), fmt.Sprintf("%d\n", (i*7)*(i*7-1)/2)
	if i%3 == 0 {
		code, want = fmt.Sprintf("from pybox_tools import tools\nprint(tools.echo.echo(text='g%d', times=2)['echo'])", i), fmt.Sprintf("g%dg%d\n", i, i)
	}
	res, err := g.cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_code", Arguments: map[string]any{"code": code}})
	if err != nil {
		return err
	}
	var out struct{ Stdout string }
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &out)
	if res.IsError || out.Stdout != want {
		return fmt.Errorf("got %.300q, want stdout %q", text(res), want)
	}
	return nil
}

// soakSampler samples the server's RSS, descriptors and threads, and the
// disk under its directories, once a second.
type soakSampler struct {
	pid                            int
	dirs                           []string
	peakRSS, peakFDs, peakThreads  atomic.Int64
	peakDisk, lastDisk, peakTenant atomic.Int64 // allocated
	peakApparent                   atomic.Int64
	early, late                    [2]atomic.Int64 // peaks of RSS and fds in each half
	samples                        atomic.Int64
	mu                             sync.Mutex
	tenantName                     string
	where                          map[string]int64 // allocated by folder, in the last sample (sampler's goroutine only)
	whereAtPeak                    string
}

func (s *soakSampler) tenant() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tenantName + "; its biggest folders then: " + s.whereAtPeak
}

// biggest names tenant's biggest folders (over 1 MiB) in where.
func biggest(where map[string]int64, tenant string) string {
	var b strings.Builder
	for k, v := range where {
		if v > 1<<20 && strings.Contains(k, ":"+tenant) {
			fmt.Fprintf(&b, "%s=%dMiB ", k, v>>20)
		}
	}
	return b.String()
}

func (s *soakSampler) run(ctx context.Context, t *testing.T) {
	deadline, _ := ctx.Deadline()
	half := time.Now().Add(time.Until(deadline) / 2)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		fds, threads, rss := procStats(t, s.pid)
		raise(&s.peakRSS, int64(rss))
		raise(&s.peakFDs, int64(fds))
		raise(&s.peakThreads, int64(threads))
		phase := &s.early
		if time.Now().After(half) {
			phase = &s.late
		}
		raise(&phase[0], int64(rss))
		raise(&phase[1], int64(fds))
		total, apparent, byTenant, _ := s.disk()
		raise(&s.peakDisk, total)
		raise(&s.peakApparent, apparent)
		s.lastDisk.Store(total)
		for name, n := range byTenant {
			if raise(&s.peakTenant, n) {
				s.mu.Lock()
				s.tenantName = name
				s.whereAtPeak = biggest(s.where, name)
				s.mu.Unlock()
			}
		}
		s.samples.Add(1)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// disk sums what the server's directories hold: blocks allocated on the
// disk (in total and per tenant), and apparent size (sparse files count
// their length), in total and per tenant.
func (s *soakSampler) disk() (alloc, apparent int64, byTenant, apparentByTenant map[string]int64) {
	byTenant, apparentByTenant = map[string]int64{}, map[string]int64{}
	s.where = map[string]int64{}
	for _, root := range s.dirs {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil // a file a run removed meanwhile
			}
			fi, err := d.Info()
			if err != nil {
				return nil
			}
			var blocks int64
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				blocks = st.Blocks * 512
			}
			alloc += blocks
			apparent += fi.Size()
			if rel, err := filepath.Rel(filepath.Join(root, "tenants"), p); err == nil && !strings.HasPrefix(rel, "..") {
				name := strings.SplitN(rel, string(filepath.Separator), 2)[0]
				byTenant[name] += blocks
				apparentByTenant[name] += fi.Size()
				parts := strings.SplitN(rel, string(filepath.Separator), 4)
				if len(parts) > 3 {
					parts = parts[:3]
				}
				s.where[filepath.Base(root)+":"+filepath.Join(parts...)] += blocks
			}
			return nil
		})
	}
	return alloc, apparent, byTenant, apparentByTenant
}

// raise sets a to v if v is larger, and says whether it did.
func raise(a *atomic.Int64, v int64) bool {
	for {
		old := a.Load()
		if v <= old {
			return false
		}
		if a.CompareAndSwap(old, v) {
			return true
		}
	}
}

// waitSettled waits (bounded) for the server's descriptors to come back
// within slack of where they were before the soak, once the floods stopped (idle
// connections time out; MCP sessions of the SDK clients were closed).
func waitSettled(t *testing.T, pid, fds0, slack int) bool {
	deadline := time.Now().Add(60 * time.Second)
	for {
		if fds, _, _ := procStats(t, pid); fds <= fds0+slack {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(250 * time.Millisecond) // polling /proc for the event, bounded above
	}
}

// settleSlack is how many more descriptors than before the soak the server
// may hold after it: each hostile tenant's own standing parts (its warm
// container's attach stream, its downstream server's pipes) and a margin.
const settleSlack = 12*5 + 24

// fdKinds sums a process's descriptors by kind (socket, pipe, file...).
func fdKinds(t *testing.T, pid int) map[string]int {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, _ := os.ReadDir(dir)
	kinds := map[string]int{}
	for _, e := range ents {
		l, _ := os.Readlink(filepath.Join(dir, e.Name()))
		kind, _, _ := strings.Cut(l, ":")
		if strings.HasPrefix(l, "/") {
			kind = filepath.Dir(l)
		}
		kinds[kind]++
	}
	return kinds
}

// checkKept: what each tenant keeps after the soak is within its bound,
// in allocated blocks and in apparent size.
func checkKept(t *testing.T, alloc, apparent map[string]int64) {
	t.Helper()
	for name := range apparent {
		if n := max(alloc[name], apparent[name]); n > soakTenantBound {
			t.Errorf("tenant %s keeps %d MiB after the soak (allocated %d, apparent %d); want at most %d MiB", name, n>>20, alloc[name]>>20, apparent[name]>>20, soakTenantBound>>20)
		}
	}
}

func mib(m map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range m {
		out[k] = v >> 20
	}
	return out
}

// checkSoakBounds asserts the soak's bounds, with wide margins.
func checkSoakBounds(t *testing.T, s *soakSampler, good []*soakGood, fds0, rss0 int, settled bool) {
	t.Helper()
	for _, g := range good {
		if g.failures > 0 || g.calls < 5 {
			t.Errorf("well-behaved tenant %s: %d failures in %d calls; want 0 (and at least 5 calls): %s", g.name, g.failures, g.calls, strings.Join(g.errs, "; "))
		}
	}
	if peak := s.peakRSS.Load(); peak > 300<<10 { // the old server: 2.2 GiB (call flood), 700 MiB (session flood)
		t.Errorf("server peak RSS %d MiB (%d MiB before); want at most 300 MiB", peak>>10, rss0>>10)
	}
	if s.late[0].Load() > s.early[0].Load()+64<<10 {
		t.Errorf("server RSS grew over the soak: peak %d MiB in the first half, %d MiB in the second", s.early[0].Load()>>10, s.late[0].Load()>>10)
	}
	// Each hostile address holds at most soakClientConns; the tenants' own
	// connections, containers' attach streams and downstreams come on top.
	if peak := s.peakFDs.Load(); peak > int64(fds0+(len(soakHostile)+1)*soakClientConns+150) {
		t.Errorf("server peak descriptors %d (%d before); want bounded by the connection caps", peak, fds0)
	}
	if !settled {
		t.Errorf("the server's descriptors did not come back within %d of %d, 60 s after the soak: %v", settleSlack, fds0, fdKinds(t, s.pid))
	}
	// A tenant holds its code storage, its sessions' folders and its runs'
	// outputs within one quota, plus what a fast writer adds before it is
	// stopped; closed sessions' folders must not pile up.
	if peak := s.peakTenant.Load(); peak > soakTenantBound {
		t.Errorf("tenant %s held %d MiB on disk; want at most %d MiB (the %d MiB quota + %d MiB overshoot)", s.tenant(), peak>>20, soakTenantBound>>20, soakQuotaMiB, soakOvershootMiB)
	}
	if peak := s.peakDisk.Load(); peak > int64(len(soakHostile)+2)*soakTenantBound+64<<20 { // allocated
		t.Errorf("the server's directories held %d MiB on disk; want bounded by the tenants' quotas", peak>>20)
	}
}

// soakDialer dials from a loopback address of the tenant's own.
func soakClient(ip, token string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Transport: bearer{token, &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 4}}}
}
