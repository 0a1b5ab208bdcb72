package sandbox_test

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/internal/egress"
	"github.com/pybox-dev/pybox/internal/testenv"
	"github.com/pybox-dev/pybox/sandbox"
)

// egressProgram tries every way out of the container and prints what
// happened as JSON.
const egressProgram = `import json, socket, ssl, sys, urllib.request
hp, tp = sys.argv[1], sys.argv[2]
def get(url, ctx=None):
    try:
        return urllib.request.urlopen(url, timeout=20, context=ctx).read().decode()
    except Exception as e:
        return "ERR %s: %s" % (type(e).__name__, str(e)[:160])
def connect(host, port):
    try:
        socket.create_connection((host, port), timeout=5).close()
        return "connected"
    except Exception as e:
        return "ERR %s" % type(e).__name__
def resolve(name):
    try:
        return str(socket.getaddrinfo(name, 80))
    except Exception as e:
        return "ERR %s" % type(e).__name__
ctx = ssl.create_default_context(cafile="/workspace/ca.pem")
print(json.dumps({
    "http": get("http://api.test:%s/hello" % hp),
    "https": get("https://example.com:%s/hello" % tp, ctx),
    "not_listed": get("http://other.test:%s/" % hp),
    "loopback_name": get("http://loop.test:%s/" % hp),
    "metadata_name": get("http://meta.test/latest/meta-data/"),
    "metadata_ip": get("http://169.254.169.254/latest/meta-data/"),
    "raw_socket": connect("1.1.1.1", 80),
    "raw_metadata": connect("169.254.169.254", 80),
    "dns": resolve("example.com"),
    "interfaces": [n for _, n in socket.if_nameindex()],
}))
`

// TestEgressAllowlist runs a program with an allowlist under runc and runsc:
// the allowed names work over HTTP and HTTPS (CONNECT) through the proxy,
// everything else is refused, and the container has only loopback.
func TestEgressAllowlist(t *testing.T) {
	t.Parallel() // its sandbox, folders and servers are its own; the package ends with these, two at a time
	eng := testenv.Docker(t)
	ws := workspace(t, egressProgram)
	cfg, hp, tp := allowlistRig(t, ws, func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "hello %s", r.Host) })
	for _, rt := range testenv.Runtimes(t, eng) {
		t.Run(orRunc(rt), func(t *testing.T) {
			sb, _ := newSandbox(t, sandbox.Config{Runtime: rt, Egress: cfg})
			// The first run starts a container; the second takes a warm
			// one when the refill is ready (its proxy starts then).
			res, err := sb.Run(t.Context(), sandbox.Program{Workspace: ws, File: "main.py", Args: []string{hp, tp}})
			if err == nil {
				waitFor(t, 30*time.Second, "a warm container with an egress folder", func() bool { return sb.PoolReady() > 0 })
				res, err = sb.Run(t.Context(), sandbox.Program{Workspace: ws, File: "main.py", Args: []string{hp, tp}})
			}
			if err != nil {
				t.Fatal(err)
			}
			if !res.Warm {
				t.Errorf("the second run with an allowlist did not use the warm pool")
			}
			checkAllowlist(t, res, hp, tp, "refused meta.test:80")
		})
	}
}

// TestNoEgressWithoutAllowlist: a run without an allowlist has no proxy
// variables and no socket; the container has only loopback.
func TestNoEgressWithoutAllowlist(t *testing.T) {
	sb, _ := newSandbox(t, sandbox.Config{WarmPool: -1})
	ws := workspace(t, `import os, socket; print(sorted(k for k in os.environ if "proxy" in k.lower()), os.path.exists("/run/pybox-egress"), [n for _, n in socket.if_nameindex()])`)
	res, err := sb.Run(t.Context(), sandbox.Program{Workspace: ws, File: "main.py", Egress: &egress.Config{}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(res.Stdout), "[] False ['lo']"; got != want || res.Network != "" {
		t.Errorf("got %q (network %q), want %q and no network line", got, res.Network, want)
	}
}

// allowlistRig serves up over HTTP and HTTPS on 127.0.0.1, puts the TLS
// server's certificate in ws (ca.pem, for egressProgram) and returns the
// egress of egressProgram's checks, with the two servers' ports:
// api.test (HTTP) and example.com (HTTPS) allowed, other.test not listed,
// loop.test listed but another loopback address, meta.test listed but the
// metadata address.
func allowlistRig(t *testing.T, ws string, up http.HandlerFunc) (cfg *egress.Config, hp, tp string) {
	t.Helper()
	plain := httptest.NewServer(up)
	t.Cleanup(plain.Close)
	tlsSrv := httptest.NewTLSServer(up)
	t.Cleanup(tlsSrv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSrv.Certificate().Raw})
	if err := os.WriteFile(filepath.Join(ws, "ca.pem"), ca, 0o644); err != nil {
		t.Fatal(err)
	}
	hp, tp = port(t, plain.URL), port(t, tlsSrv.URL)
	return testEgress(t, []string{"api.test:" + hp, "example.com:" + tp, "loop.test:" + hp, "meta.test"},
		map[string]string{"api.test": "127.0.0.1", "example.com": "127.0.0.1", "other.test": "127.0.0.1", "loop.test": "127.0.0.2", "meta.test": "169.254.169.254"}), hp, tp
}

// checkAllowlist checks what egressProgram saw in res against
// allowlistRig's egress: the allowed names answered, every other way out
// failed, and the network line says so, with more lines of it in want.
func checkAllowlist(t *testing.T, res sandbox.Result, hp, tp string, want ...string) {
	t.Helper()
	var got map[string]any
	if err := json.Unmarshal([]byte(res.Stdout), &got); err != nil {
		t.Fatalf("exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	t.Logf("program saw %v\nnetwork: %s", got, res.Network)
	for _, c := range []struct{ key, want string }{
		{"http", "hello api.test:" + hp}, {"https", "hello example.com:" + tp},
		{"not_listed", "ERR"}, {"loopback_name", "ERR"}, {"metadata_name", "ERR"}, {"metadata_ip", "ERR"},
		{"raw_socket", "ERR"}, {"raw_metadata", "ERR"}, {"dns", "ERR"},
	} {
		if s, _ := got[c.key].(string); !strings.HasPrefix(s, c.want) {
			t.Errorf("%s: got %q, want %q...", c.key, s, c.want)
		}
	}
	if ifs := fmt.Sprint(got["interfaces"]); ifs != "[lo]" {
		t.Errorf("interfaces in the container: %s, want only lo", ifs)
	}
	for _, w := range append([]string{"allowed api.test:" + hp + " (1 connection,", "allowed example.com:" + tp,
		"refused other.test:" + hp + " (not on the allowlist)", "refused loop.test:" + hp, "refused 169.254.169.254:80"}, want...) {
		if !strings.Contains(res.Network, w) {
			t.Errorf("network line %q lacks %q", res.Network, w)
		}
	}
}

// testEgress is the egress that allows entries, reaches only 127.0.0.1,
// and resolves names from the table names (name -> address).
func testEgress(t *testing.T, entries []string, names map[string]string) *egress.Config {
	t.Helper()
	allow, err := egress.ParseAllowlist(entries)
	if err != nil {
		t.Fatal(err)
	}
	return &egress.Config{Allow: allow, AllowAddrs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, Resolver: testResolver(t, names)}
}

func testResolver(t *testing.T, names map[string]string) egress.Resolver {
	t.Helper()
	table := map[string][]netip.Addr{}
	for n, a := range names {
		table[n] = []netip.Addr{netip.MustParseAddr(a)}
	}
	r, err := egress.NewTestResolver(table)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func port(t *testing.T, url string) string {
	t.Helper()
	i := strings.LastIndex(url, ":")
	return url[i+1:]
}

func orRunc(rt string) string {
	if rt == "" {
		return "runc"
	}
	return rt
}

// TestEgressSession: a session's kernel reaches the allowed name through
// the session's own proxy, and each turn reports what that turn reached.
func TestEgressSession(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "hello %s", r.Host) }))
	defer up.Close()
	hp := port(t, up.URL)
	cfg := testEgress(t, []string{"api.test:" + hp}, map[string]string{"api.test": "127.0.0.1"})
	sb, _ := newSandbox(t, sandbox.Config{Egress: cfg})
	ws := workspace(t, "")
	get := fmt.Sprintf(`import urllib.request; print(urllib.request.urlopen("http://api.test:%s/", timeout=20).read().decode())`, hp)
	for i, code := range []string{get, "print('offline turn')", get + "\n" + get} {
		res, err := sb.RunInSession(t.Context(), "egress", sandbox.SessionProgram{Workspace: ws, Code: code, Filename: "/workspace/s.py"})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"allowed api.test:" + hp + " (1 connection,", "none", "allowed api.test:" + hp + " (2 connections,"}[i]
		if res.ExitCode != 0 || !strings.HasPrefix(res.Network, want) {
			t.Errorf("turn %d: exit %d, stdout %q, stderr %q, network %q; want a network line with %q", i, res.ExitCode, res.Stdout, res.Stderr, res.Network, want)
		}
	}
}

// TestEgressPip: pip inside a program finds its proxy in the environment
// (PIP_PROXY, HTTP_PROXY) and installs from an index that only the proxy
// reaches (by name, a server of the test on 127.0.0.1).
func TestEgressPip(t *testing.T) {
	wheels := t.TempDir()
	name := filepath.Base(testenv.WriteWheel(t, wheels, testenv.Wheel{Name: "pyboxegress", Version: "1.0", Code: "X = 42\n"}))
	mux := http.NewServeMux()
	mux.HandleFunc("/simple/pyboxegress/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "<html><body><a href=\"/files/%s\">%s</a></body></html>\n", name, name)
	})
	mux.Handle("/files/", http.StripPrefix("/files/", http.FileServer(http.Dir(wheels))))
	idx := httptest.NewServer(mux)
	defer idx.Close()
	ip := port(t, idx.URL)
	cfg := testEgress(t, []string{"index.test:" + ip}, map[string]string{"index.test": "127.0.0.1"})
	sb, _ := newSandbox(t, sandbox.Config{WarmPool: -1, Egress: cfg})
	ws := workspace(t, fmt.Sprintf(`import subprocess, sys
py = next(p for p in (sys.executable, "/usr/bin/python3") if subprocess.call([p, "-m", "pip", "--version"], stdout=subprocess.DEVNULL) == 0)
rc = subprocess.call([py, "-m", "pip", "install", "--no-cache-dir", "--disable-pip-version-check", "--target", "/tmp/t",
    "--index-url", "http://index.test:%s/simple/", "--trusted-host", "index.test", "pyboxegress"], stdout=sys.stderr)
sys.path.insert(0, "/tmp/t")
import pyboxegress
print(rc, pyboxegress.X)
`, ip))
	res, err := sb.Run(t.Context(), sandbox.Program{Workspace: ws, File: "main.py"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(res.Stdout); got != "0 42" || !strings.Contains(res.Network, "allowed index.test:"+ip+" (") {
		t.Errorf("pip through the proxy: stdout %q, network %q, stderr:\n%s", got, res.Network, res.Stderr)
	}
}
