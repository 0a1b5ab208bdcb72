package testenv

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// DaemonProxy stands between a pybox server and the real Docker daemon on
// a socket of its own, so a test can take "the daemon" away and bring it
// back without touching the daemon every other test uses: Stop closes the
// socket and cuts every connection (as a daemon restart does); Start opens
// it again. The containers keep running on the real daemon meanwhile, so a
// test also sees whether pybox removes what it could not remove while the
// daemon was away.
type DaemonProxy struct {
	Host string // the DOCKER_HOST value for the server under test

	t        testing.TB
	sock     string
	upstream string
	mu       sync.Mutex
	ln       net.Listener
	conns    map[net.Conn]bool
	wg       sync.WaitGroup
}

// NewDaemonProxy returns a started proxy to the daemon of DOCKER_HOST (or
// the default socket); it is stopped at the end of the test.
func NewDaemonProxy(t testing.TB) *DaemonProxy {
	t.Helper()
	upstream := "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); strings.HasPrefix(h, "unix://") {
		upstream = strings.TrimPrefix(h, "unix://")
	}
	dir, err := os.MkdirTemp("", "pybox-proxy-") // short: socket paths are limited to ~100 bytes
	if err != nil {
		t.Fatal(err)
	}
	p := &DaemonProxy{t: t, sock: filepath.Join(dir, "docker.sock"), upstream: upstream, conns: map[net.Conn]bool{}}
	p.Host = "unix://" + p.sock
	p.Start()
	t.Cleanup(func() { p.Stop(); p.wg.Wait(); os.RemoveAll(dir) })
	return p
}

// Start opens the socket (again).
func (p *DaemonProxy) Start() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		return
	}
	os.Remove(p.sock)
	ln, err := net.Listen("unix", p.sock)
	if err != nil {
		p.t.Fatalf("daemon proxy: %v", err)
	}
	p.ln = ln
	p.wg.Go(func() { p.accept(ln) })
}

// Stop closes the socket and cuts every connection through it.
func (p *DaemonProxy) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		return
	}
	p.ln.Close()
	p.ln = nil
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

func (p *DaemonProxy) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("unix", p.upstream)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.ln != ln { // stopped meanwhile
			p.mu.Unlock()
			c.Close()
			up.Close()
			return
		}
		p.conns[c], p.conns[up] = true, true
		p.mu.Unlock()
		p.wg.Go(func() { pipe(c, up) })
	}
}

// pipe copies both ways until either side ends, then closes both.
func pipe(a, b net.Conn) {
	var once sync.Once
	done := func() { once.Do(func() { a.Close(); b.Close() }) }
	go func() { io.Copy(a, b); done() }()
	io.Copy(b, a)
	done()
}
