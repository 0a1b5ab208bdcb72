// Package egressdir runs one egress proxy (internal/egress) for one run on
// a unix socket in a private host folder, the only way a container with
// network none reaches the outside: the folder is bind-mounted read-only
// at Mount, and the in-image runner (or the install's download script)
// forwards the program's loopback proxy port to the socket. A Run is
// used by one goroutine: Start, then Close once.
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
)

// maxSocketPath keeps the socket's host path within sun_path (108 bytes on
// Linux, 104 on macOS).
const maxSocketPath = 100

// Run is one run's proxy, serving until Close.
type Run struct {
	root   string // the private folder (0700, the server's): removed by Close
	dir    string // root/s, mounted: the socket's folder
	proxy  *egress.Proxy
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
	if base == "" || len(base)+len("/egress-0123456789/s/"+Socket) > maxSocketPath {
		base = os.TempDir()
	}
	root, err := os.MkdirTemp(base, "egress-")
	if err != nil {
		return nil, fmt.Errorf("egress folder: %w", err)
	}
	r := &Run{root: root, dir: filepath.Join(root, "s"), done: make(chan error, 1)}
	if err := r.listen(cfg); err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	return r, nil
}

// listen creates the socket's folder (readable by the container's user,
// who cannot write it: the mount is read-only and the folder the
// server's) and serves the proxy on its socket.
func (r *Run) listen(cfg egress.Config) error {
	if err := os.Mkdir(r.dir, 0o755); err != nil {
		return fmt.Errorf("egress folder: %w", err)
	}
	if err := os.Chmod(r.dir, 0o755); err != nil { // whatever the umask
		return fmt.Errorf("egress folder: %w", err)
	}
	p, err := egress.New(cfg)
	if err != nil {
		return fmt.Errorf("egress proxy: %w", err)
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
	ctx, cancel := context.WithCancel(context.Background())
	r.proxy, r.cancel = p, cancel
	go func() { r.done <- p.Serve(ctx, l) }()
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
	if r.closed {
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
	r.cancel()
	err := <-r.done
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	r.report = r.proxy.Report()
	return r.report, errors.Join(err, os.RemoveAll(r.root))
}
