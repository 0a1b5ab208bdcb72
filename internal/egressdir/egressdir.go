// Package egressdir runs one egress proxy (internal/egress) for one run on
// a unix socket in a private host folder, the only way a container with
// network none reaches the outside: the folder is bind-mounted read-only
// at Mount, and the in-image runner (or the install's download script)
// forwards the program's loopback proxy port to the socket. Where no
// folder can be mounted (Kubernetes), Over serves the proxy on another
// listener (the runner's channel, internal/egressmux) and the runner is
// told Channel instead of the socket's path. A Run is used by one
// goroutine: Start, then Close once.
package egressdir

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/docker/docker/api/types/mount"

	"github.com/pybox-dev/pybox/internal/egress"
)

// Where the proxy's socket appears in a container, and the variable that
// tells the runner so.
const (
	Mount  = "/run/pybox-egress"
	Socket = "proxy.sock"
	Env    = "PYBOX_EGRESS"
	// Channel, as Env's value: the proxy is reached over the runner's
	// own channel (its stdin and stdout), not a socket.
	Channel = "channel"
)

// maxSocketPath keeps the socket's host path within sun_path (108 bytes on
// Linux, 104 on macOS).
const maxSocketPath = 100

// Run is one run's proxy, serving until Close.
type Run struct {
	root   string // the private folder (0700, the server's): removed by Close
	dir    string // root/s, mounted: the socket's folder
	l      net.Listener
	proxy  *egress.Proxy // nil until Serve
	cancel context.CancelFunc
	done   chan error
	report egress.Report
	closed bool
}

// Start makes a fresh private folder under base ("" or too long a path:
// the system's temporary folder), listens on its socket and serves cfg's
// proxy there. The folder is new (os.MkdirTemp: nothing an earlier
// program could have placed there is used) and never shared.
func Start(base string, cfg egress.Config) (*Run, error) {
	r, err := Listen(base)
	if err != nil {
		return nil, err
	}
	if err := r.Serve(cfg); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// Listen makes the private folder and its socket, listening; connections
// wait in the socket's queue until Serve (a warm container's, made before
// its run is known, gets its proxy when a run takes it).
func Listen(base string) (*Run, error) {
	if base == "" || len(base)+len("/egress-0123456789/s/"+Socket) > maxSocketPath {
		base = os.TempDir()
	}
	root, err := os.MkdirTemp(base, "egress-")
	if err != nil {
		return nil, fmt.Errorf("egress folder: %w", err)
	}
	r := &Run{root: root, dir: filepath.Join(root, "s"), done: make(chan error, 1)}
	if err := r.listen(); err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	return r, nil
}

// Over is a Run whose proxy will serve l (closed with the Run), with no
// folder: Dir is "".
func Over(l net.Listener) *Run {
	return &Run{l: l, done: make(chan error, 1)}
}

// listen creates the socket's folder (readable by the container's user,
// who cannot write it: the mount is read-only and the folder the
// server's) and listens on its socket.
func (r *Run) listen() error {
	if err := os.Mkdir(r.dir, 0o755); err != nil {
		return fmt.Errorf("egress folder: %w", err)
	}
	if err := os.Chmod(r.dir, 0o755); err != nil { // whatever the umask
		return fmt.Errorf("egress folder: %w", err)
	}
	path := filepath.Join(r.dir, Socket)
	l, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("egress socket: %w", err)
	}
	if err := os.Chmod(path, 0o666); err != nil { // any uid of the container connects
		l.Close()
		return fmt.Errorf("egress socket: %w", err)
	}
	r.l = l
	return nil
}

// Serve starts cfg's proxy on the socket, once.
func (r *Run) Serve(cfg egress.Config) error {
	if r.proxy != nil || r.closed {
		return errors.New("egress proxy: served twice or closed")
	}
	p, err := egress.New(cfg)
	if err != nil {
		return fmt.Errorf("egress proxy: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.proxy, r.cancel = p, cancel
	go func() { r.done <- p.Serve(ctx, r.l) }()
	return nil
}

// Dir is the host folder to mount (read-only) at Mount.
func (r *Run) Dir() string { return r.dir }

// Mount is the read-only bind mount of the socket's folder at Mount.
func (r *Run) Mount() mount.Mount {
	return mount.Mount{Type: mount.TypeBind, Source: r.dir, Target: Mount, ReadOnly: true}
}

// Report is what the proxy has seen so far (all of it, once closed).
func (r *Run) Report() egress.Report {
	if r.closed || r.proxy == nil {
		return r.report
	}
	return r.proxy.Report()
}

// SocketPath is the socket inside the container.
func SocketPath() string { return Mount + "/" + Socket }

// Close stops the proxy, waits for every connection it served, removes
// the folder and returns what the proxy saw. Idempotent; nil-safe.
func (r *Run) Close() (egress.Report, error) {
	if r == nil {
		return egress.Report{}, nil
	}
	if r.closed {
		return r.report, nil
	}
	r.closed = true
	if r.proxy == nil { // never served
		r.l.Close()
		return r.report, r.remove()
	}
	r.cancel()
	err := <-r.done
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	r.report = r.proxy.Report()
	return r.report, errors.Join(err, r.remove())
}

// remove removes the private folder, if the Run has one.
func (r *Run) remove() error {
	if r.root == "" {
		return nil
	}
	return os.RemoveAll(r.root)
}
