//go:build !windows

package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The hostile programs of the soak, by kind.
const (
	soakOutputFlood = "import os, sys\nchunk = 'o' * (1 << 20)\nfor _ in range(64):\n    sys.stdout.write(chunk)\n    os.write(2, chunk.encode())\n"
	soakCallFlood   = `from pybox_tools import call_mcp_tool
cells = dict(zip(call_mcp_tool.__code__.co_freevars, [c.cell_contents for c in call_mcp_tool.__closure__]))
pipe = open(cells["call_w"], "wb", buffering=0, closefd=False)
lines = b'{"id": 1, "tool": "echo.echo", "args": {"text": "x"}}\n' * 2000
while True:
    pipe.write(lines)
`
)

// soakKernelHog takes every inotify instance its uid may have and pipe
// buffers past the per-uid soft limit, and holds them for 3 s.
const soakKernelHog = `import ctypes, fcntl, os, resource, time
libc = ctypes.CDLL(None, use_errno=True)
inotify, pipes = [], []
while len(inotify) < resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 300:
    fd = libc.inotify_init1(0)
    if fd < 0:
        break
    inotify.append(fd)
for _ in range(128):
    r, w = os.pipe()
    pipes.append((r, w))
    try:
        fcntl.fcntl(w, 1031, 1 << 20)
    except OSError:
        pass
print("held", len(inotify), flush=True)
time.sleep(3)
`

// soakCounts counts the hostile tenants' requests and their outcomes.
type soakCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *soakCounts) add(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[key]++
}

func (c *soakCounts) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([]string, 0, len(c.n))
	for k := range c.n {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, c.n[k])
	}
	return b.String()
}

// hostileTenant runs its tenant's floods until ctx ends.
func hostileTenant(ctx context.Context, t *testing.T, h *httpServer, name, ip string, counts *soakCounts) {
	if name == "hsess" {
		sessionFlood(ctx, h, ip, counts)
		return
	}
	var steps []func(cs *mcp.ClientSession, i int) string
	run := func(args map[string]any) func(cs *mcp.ClientSession, i int) string {
		return func(cs *mcp.ClientSession, _ int) string { return hostileCall(ctx, cs, "execute_code", args) }
	}
	switch name {
	case "hout":
		steps = append(steps, run(map[string]any{"code": soakOutputFlood, "timeout_s": 20}), run(map[string]any{"code": sparseOutputs, "timeout_s": 20}))
	case "hdisk":
		steps = append(steps, run(map[string]any{"code": quotaProgram("fill", 1024), "timeout_s": 60}),
			func(cs *mcp.ClientSession, i int) string { // a fresh session filled to its quota, then closed
				id := fmt.Sprintf("fill-%d", i)
				r := hostileCall(ctx, cs, "execute_code", map[string]any{"code": quotaProgram("s", 1024), "session_id": id, "timeout_s": 60})
				hostileCall(ctx, cs, "close_session", map[string]any{"session_id": id})
				return "session-" + r
			})
	case "hcode":
		steps = append(steps, run(map[string]any{"code": soakCallFlood, "timeout_s": 10}))
	case "hkern":
		steps = append(steps, run(map[string]any{"code": soakKernelHog, "timeout_s": 20}))
	}
	hc := soakClient(ip, soakToken(name))
	var cs *mcp.ClientSession
	defer func() {
		if cs != nil {
			cs.Close()
		}
	}()
	for i := 0; ctx.Err() == nil; i++ {
		if cs == nil {
			var err error
			if cs, err = soakConnect(ctx, h, hc); err != nil {
				counts.add(name + ":connect-refused")
				pause(ctx, time.Second)
				continue
			}
		}
		r := steps[i%len(steps)](cs, i)
		counts.add(name + ":" + r)
		if r == "broken" {
			cs.Close()
			cs = nil
		}
	}
}

// hostileCall makes a call and names its outcome: ok, error (a tool
// error), or broken (a protocol error: the session is dropped).
func hostileCall(ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) string {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	switch {
	case err != nil:
		return "broken"
	case res.IsError:
		return "error"
	}
	return "ok"
}

// soakConnect opens an SDK session with the tenant's HTTP client (one
// per tenant, so that its connections are reused).
func soakConnect(ctx context.Context, h *httpServer, hc *http.Client) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "pybox-soak", Version: "test"}, nil)
	return client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: h.url + "/mcp", HTTPClient: hc}, nil)
}

// sessionFlood: initializes with 4 MiB of parameters, MCP sessions opened
// past the tenant's cap and left open (then deleted), and SDK sessions
// opened, used and closed, over and over.
func sessionFlood(ctx context.Context, h *httpServer, ip string, counts *soakCounts) {
	token := soakToken("hsess")
	client := soakClient(ip, token)
	bigInit := strings.Replace(initializeBody, `"name":"raw"`, `"name":"`+strings.Repeat("x", 4<<20)+`"`, 1)
	for ctx.Err() == nil {
		for range 2 {
			code, _ := postInitialize(ctx, client, h.url, "", bigInit)
			counts.add(fmt.Sprintf("hsess:big-init-%d", code))
		}
		var opened []string
		for range soakMCPSessions + 4 {
			code, id := postInitialize(ctx, client, h.url, "", initializeBody)
			counts.add(fmt.Sprintf("hsess:init-%d", code))
			if id != "" {
				opened = append(opened, id)
			}
		}
		for _, id := range opened {
			req, _ := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodDelete, h.url+"/mcp", nil)
			req.Header.Set("Mcp-Session-Id", id)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
			}
		}
		for range 4 { // SDK sessions opened, used and closed
			cs, err := soakConnect(ctx, h, client)
			if err != nil {
				counts.add("hsess:sdk-refused")
				continue
			}
			if _, err := cs.ListTools(ctx, nil); err == nil {
				counts.add("hsess:sdk-ok")
			}
			cs.Close()
		}
		pause(ctx, 200*time.Millisecond) // a flood, but one that leaves the 2 cores to the server
	}
}

// slowLoris keeps opening connections from one address without a token:
// some idle after their 401, some sending headers a byte at a time, some
// sending nothing; each round waits for the server to close them.
func slowLoris(ctx context.Context, h *httpServer, ip string, counts *soakCounts) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	addr := strings.TrimPrefix(h.url, "http://")
	for ctx.Err() == nil {
		var conns []net.Conn
		for i := range 2 * soakClientConns {
			c, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				counts.add("loris:dial-failed")
				continue
			}
			conns = append(conns, c)
			switch i % 3 {
			case 0:
				fmt.Fprintf(c, "GET /mcp HTTP/1.1\r\nHost: x\r\n\r\n")
			case 1:
				fmt.Fprintf(c, "G")
			}
		}
		var wg sync.WaitGroup
		for _, c := range conns {
			wg.Go(func() {
				defer c.Close()
				if waitClosed(c, 10*soakIdleTimeout) == nil {
					counts.add("loris:closed-by-server")
				} else {
					counts.add("loris:still-open")
				}
			})
		}
		wg.Wait()
	}
}

// pause waits d, or less if ctx ends (the soak's own pacing).
func pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
