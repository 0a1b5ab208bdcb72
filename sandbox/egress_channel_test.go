//go:build linux

package sandbox_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/internal/testenv"
	"github.com/pybox-dev/pybox/sandbox"
)

// TestEgressChannel runs the egress checks of TestEgressAllowlist with the
// proxy reached over the runner's channel (as on Kubernetes): the allowed
// names work over HTTP and HTTPS, everything else is refused, and a 24 MiB
// download and a 6 MiB upload arrive intact (the streams' windows at work
// both ways); then a session reaches the allowed name over its channel.
func TestEgressChannel(t *testing.T) {
	t.Parallel() // its sandbox, folders and servers are its own; the package ends with these, two at a time
	eng := testenv.Docker(t)
	up := func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			w.Write(channelPayload())
		case "/sum":
			h := sha256.New()
			io.Copy(h, r.Body)
			fmt.Fprint(w, hex.EncodeToString(h.Sum(nil)))
		default:
			fmt.Fprintf(w, "hello %s", r.Host)
		}
	}
	ws := workspace(t, egressProgram)
	cfg, hp, tp := allowlistRig(t, ws, up)
	volume := fmt.Sprintf(`import hashlib, urllib.request
d = urllib.request.urlopen("http://api.test:%[1]s/big", timeout=60).read()
u = urllib.request.urlopen(urllib.request.Request("http://api.test:%[1]s/sum", data=d[:6 << 20]), timeout=60).read().decode()
print(len(d), hashlib.sha256(d).hexdigest(), u == hashlib.sha256(d[:6 << 20]).hexdigest())
`, hp)
	if err := os.WriteFile(filepath.Join(ws, "volume.py"), []byte(volume), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(channelPayload())
	for _, rt := range testenv.Runtimes(t, eng) {
		t.Run(orRunc(rt), func(t *testing.T) {
			sb, _ := newSandbox(t, sandbox.Config{Runtime: rt, Egress: cfg, EgressChannel: true})
			res, err := sb.Run(t.Context(), sandbox.Program{Workspace: ws, File: "main.py", Args: []string{hp, tp}})
			if err != nil {
				t.Fatal(err)
			}
			checkAllowlist(t, res, hp, tp)
			res, err = sb.Run(t.Context(), sandbox.Program{Workspace: ws, File: "volume.py", Timeout: 5 * time.Minute})
			if want := fmt.Sprintf("%d %x True\n", len(channelPayload()), sum); err != nil || res.Stdout != want {
				t.Errorf("download and upload over the channel: %v, exit %d (timed out %v), stdout %q (want %q), stderr %q", err, res.ExitCode, res.TimedOut, res.Stdout, want, res.Stderr)
			}
			t.Logf("24 MiB down and 6 MiB up over the channel in %v", res.Duration.Round(time.Millisecond))
			get := fmt.Sprintf(`import urllib.request; print(urllib.request.urlopen("http://api.test:%s/", timeout=20).read().decode())`, hp)
			sres, err := sb.RunInSession(t.Context(), "chan", sandbox.SessionProgram{Workspace: ws, Code: get, Filename: "/workspace/s.py"})
			if err != nil || sres.Stdout != "hello api.test:"+hp+"\n" || !strings.HasPrefix(sres.Network, "allowed api.test:"+hp+" (1 connection,") {
				t.Errorf("a session over the channel: %v, %+v", err, sres)
			}
		})
	}
}

var channelPayload = sync.OnceValue(func() []byte {
	b := make([]byte, 24<<20)
	for i := range b {
		b[i] = byte(i*7 + i>>13)
	}
	return b
})

// channelFlood opens 64 tunnels to a sink that reads nothing and writes
// into all of them as fast as it can until each has been stuck for 3 s,
// prints how much it wrote and "stuck", then holds the tunnels open.
const channelFlood = `import os, socket, sys, threading, time
host, port = os.environ["HTTP_PROXY"].rsplit("/", 1)[1].split(":")
target = "sink.test:" + sys.argv[1]
sent = [0] * 64
def flood(i):
    s = socket.create_connection((host, int(port)), timeout=30)
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    if b" 200 " not in head.split(b"\r\n")[0]:
        print("refused", head[:80])
        return
    s.settimeout(3)
    chunk = b"x" * 65536
    try:
        while True:
            sent[i] += s.send(chunk)
    except socket.timeout:
        pass
    socks.append(s)
socks = []
ts = [threading.Thread(target=flood, args=(i,)) for i in range(64)]
for t in ts: t.start()
for t in ts: t.join()
print(len(socks), sum(sent) >> 20, "stuck", flush=True)
time.sleep(4)
`

// TestEgressChannelFlood: a program writes as fast as it can into 64
// tunnels whose destination reads nothing. The server's memory stays
// within the channel's bound (64 streams x 64 KiB) plus the proxy's own
// fixed buffers per connection, measured as the live heap while every
// tunnel is stuck; what the program wrote stays in the container's and
// the kernel's buffers.
func TestEgressChannelFlood(t *testing.T) {
	sink, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn // held open, never read, until the test ends
	var accepting sync.WaitGroup
	accepting.Go(func() {
		for {
			c, err := sink.Accept()
			if err != nil {
				return
			}
			c.(*net.TCPConn).SetReadBuffer(16 << 10)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	defer func() {
		sink.Close()
		accepting.Wait()
		for _, c := range conns {
			c.Close()
		}
	}()
	sp := port(t, "http://"+sink.Addr().String())
	small := &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error { // the proxy's side of the sink: small kernel buffers
		return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, 16<<10) })
	}}
	cfg := testEgress(t, []string{"sink.test:" + sp}, map[string]string{"sink.test": "127.0.0.1"})
	cfg.Dial = small.DialContext
	sb, _ := newSandbox(t, sandbox.Config{Egress: cfg, EgressChannel: true, WarmPool: -1})
	ws := workspace(t, channelFlood)
	base := liveHeap()
	var grew uint64
	stuck := make(chan struct{})
	var once sync.Once
	res, err := sb.Run(t.Context(), sandbox.Program{Workspace: ws, File: "main.py", Args: []string{sp}, Timeout: 120e9,
		OnOutput: func(_ string, chunk []byte) {
			if strings.Contains(string(chunk), "stuck") {
				once.Do(func() { grew = liveHeap() - min(base, liveHeap()); close(stuck) })
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-stuck:
	default:
		t.Fatalf("the flood did not get stuck: exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	t.Logf("program: %s; server's live heap grew %d KiB while 64 tunnels were stuck (channel bound %d KiB)",
		strings.TrimSpace(res.Stdout), grew>>10, 64*64)
	if !strings.HasPrefix(res.Stdout, "64 ") {
		t.Errorf("not every tunnel was opened: %q %q", res.Stdout, res.Stderr)
	}
	if grew > 24<<20 {
		t.Errorf("the server's live heap grew %d MiB during the flood; the bound is 4 MiB of windows plus the proxy's buffers", grew>>20)
	}
}

// liveHeap is the heap in use after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}
