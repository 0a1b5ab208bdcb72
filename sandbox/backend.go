package sandbox

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/pybox-dev/pybox/internal/engine"
	"github.com/pybox-dev/pybox/internal/kube"
)

// Backend is what a Sandbox needs from the engine that runs its
// containers: Docker or Podman (internal/engine, through Docker) or
// Kubernetes (internal/kube, a Pod per container). Specs are the Docker
// shape of the container contract (ContainerConfig); a backend maps them
// to its own objects, and refuses what it cannot honour.
type Backend interface {
	// Start creates and starts spec's container with its stdin and stdout
	// attached: the runner's private channel. spec.Stderr receives stderr.
	Start(ctx context.Context, spec engine.Spec) (Attachment, error)
	// Run runs spec to completion and removes it (probes).
	Run(ctx context.Context, spec engine.Spec) (engine.Exit, error)
	// List returns the containers carrying every label.
	List(ctx context.Context, labels map[string]string) ([]engine.Summary, error)
	// Remove force-removes a container; one already gone counts as removed.
	Remove(ctx context.Context, id string) error
	// RemoveStrays retries the removals that failed and returns how many
	// containers are still left.
	RemoveStrays(ctx context.Context) int
}

// Attachment is a started container and the runner's channel to it.
type Attachment interface {
	ContainerID() string
	Output() io.Reader                 // its stdout (the runner's frames)
	Write(p []byte) (int, error)       // to its stdin
	Broken() bool                      // nothing more can be exchanged with it
	Done() <-chan struct{}             // closed once it has exited
	Exit() engine.Exit                 // how it ended; valid after Done
	Destroy(ctx context.Context) error // kill and remove it; idempotent
}

// Docker is the Docker (or Podman) backend over c.
func Docker(c *engine.Client) Backend { return docker{c} }

type docker struct{ *engine.Client }

func (d docker) Start(ctx context.Context, spec engine.Spec) (Attachment, error) {
	a, err := d.StartAttached(ctx, spec)
	if err != nil {
		return nil, err
	}
	return a, nil
}

// exitLatency is implemented by attachments whose engine reports a
// container's exit sooner than teardownWait bounds (an in-memory engine:
// at once): how long a run whose runner stopped answering waits for that
// report before it says nothing is known of the program's end.
type exitLatency interface{ ExitLatency() time.Duration }

// lossyAtExit is implemented by backends whose attach stream drops what a
// container writes just before it exits (Kubernetes): once runners linger
// after their verdict there (see the runner's linger).
type lossyAtExit interface{ LossyAtExit() bool }

// Kubernetes is the Kubernetes backend over b: a pod per container.
func Kubernetes(b *kube.Backend) Backend { return kubernetes{b} }

type kubernetes struct{ *kube.Backend }

func (kubernetes) LossyAtExit() bool { return true }

// anyUID is implemented by backends whose containers may run as any uid,
// whatever the server's own, and share no host folder of the server's
// (Kubernetes: a pod's uid is the node's, its workspace its own): each
// container then runs as a uid of its own (Config.SharedUID). RLIMIT_NPROC
// counts a uid's processes across the whole node, so pods sharing one uid
// would share one process budget: a tenant's fork flood would keep every
// other tenant's runners from forking.
type anyUID interface{ AnyUID() bool }

func (kubernetes) AnyUID() bool { return true }

// orphanReaper is implemented by backends that find the containers of
// gone servers without lease files (Kubernetes: replicas on other hosts
// share the namespace): ReapOrphans at start, ReapOrphansEvery from the
// reaper's tick (it keeps its own pace).
type orphanReaper interface {
	ReapOrphans(ctx context.Context) (int, error)
	ReapOrphansEvery(ctx context.Context)
}

// ErrNoEgress: the backend cannot give a run the egress proxy
// (Capabilities.Egress is false).
var ErrNoEgress = errors.New("this backend cannot reach pybox's egress proxy: " +
	"an egress allowlist needs Docker, Podman or Kubernetes (see docs/packages.md, Network by allowlist); empty the allowlist to run without network")

// channelEgress is implemented by backends whose containers cannot reach
// a unix socket on pybox's host (pods): their runs reach the egress proxy
// over the runner's channel (internal/egressmux).
type channelEgress interface{ EgressOverChannel() bool }

func (kubernetes) EgressOverChannel() bool { return true }

func (k kubernetes) Start(ctx context.Context, spec engine.Spec) (Attachment, error) {
	a, err := k.Backend.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	return a, nil
}
