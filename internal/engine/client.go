package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
)

// ErrUnreachable reports that the Docker daemon did not answer.
var ErrUnreachable = errors.New("Docker is not reachable")

// teardownTimeout bounds every best-effort cleanup call.
const teardownTimeout = 15 * time.Second

// Client wraps the Docker API client with the calls pybox needs.
type Client struct {
	api *client.Client
	log *slog.Logger

	mu     sync.Mutex
	strays map[string]bool // containers whose removal failed: RemoveStrays tries again
	kind   flavor          // Docker or Podman, once known
}

// New connects to the daemon named by the environment (DOCKER_HOST and
// friends) with API version negotiation. It does not contact the daemon.
func New(log *slog.Logger) (*Client, error) {
	api, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Client{api: api, log: log, strays: map[string]bool{}}, nil
}

// NewAt connects to the daemon at host (a DOCKER_HOST value, such as
// Podman's socket) instead of the environment's.
func NewAt(host string, log *slog.Logger) (*Client, error) {
	api, err := client.NewClientWithOpts(client.FromEnv, client.WithHost(host), client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker client for %s: %w", host, err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Client{api: api, log: log, strays: map[string]bool{}}, nil
}

// Close releases the client's connections.
func (c *Client) Close() error { return c.api.Close() }

// Version describes the daemon.
type Version struct {
	Server     string   // engine version, e.g. 20.10.24
	APIVersion string   // negotiated API version
	Runtimes   []string // OCI runtimes the daemon knows (runc, crun, runsc, ...)
}

// Ping checks that the daemon answers and returns its version and runtimes.
func (c *Client) Ping(ctx context.Context) (Version, error) {
	if _, err := c.api.Ping(ctx); err != nil {
		if uerr := unreachable(err); errors.Is(uerr, ErrUnreachable) {
			return Version{}, uerr
		}
		return Version{}, fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	sv, err := c.api.ServerVersion(ctx)
	if err != nil {
		return Version{}, fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	v := Version{Server: sv.Version, APIVersion: c.api.ClientVersion()}
	info, err := c.api.Info(ctx)
	if err != nil {
		return v, fmt.Errorf("daemon info: %w", err)
	}
	for name := range info.Runtimes {
		v.Runtimes = append(v.Runtimes, name)
	}
	slices.Sort(v.Runtimes)
	return v, nil
}

// Summary is one container found by List.
type Summary struct {
	ID     string
	Name   string
	State  string
	Labels map[string]string
}

// List returns every container (running or not) carrying all the labels.
func (c *Client) List(ctx context.Context, labels map[string]string) ([]Summary, error) {
	list, err := c.api.ContainerList(ctx, container.ListOptions{All: true, Filters: labelFilter(labels)})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", unreachable(err))
	}
	out := make([]Summary, 0, len(list))
	for _, s := range list {
		name := ""
		if len(s.Names) > 0 {
			name = s.Names[0]
		}
		out = append(out, Summary{ID: s.ID, Name: name, State: s.State, Labels: s.Labels})
	}
	return out, nil
}

// Remove force-removes a container. A container that is already gone counts
// as removed. It runs on a detached context so a cancelled caller cannot leak.
func (c *Client) Remove(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	err := c.api.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	// Podman refuses while the container is between states ("container
	// state improper", as it stops on its own): a moment later it goes.
	for i := 0; err != nil && i < 20 && strings.Contains(err.Error(), "state improper") && ctx.Err() == nil; i++ {
		time.Sleep(50 * time.Millisecond)
		err = c.api.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	}
	if err != nil && cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "already in progress") {
		err = c.awaitRemoval(ctx, id) // the daemon is removing it (AutoRemove): it is ours once gone
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil && !cerrdefs.IsNotFound(err) {
		c.strays[id] = true // the daemon away, say: RemoveStrays tries again
		return fmt.Errorf("remove container %s: %w", short(id), unreachable(err))
	}
	delete(c.strays, id)
	return nil
}

// awaitRemoval waits until container id no longer exists.
func (c *Client) awaitRemoval(ctx context.Context, id string) error {
	for {
		_, err := c.api.ContainerInspect(ctx, id)
		if err != nil {
			return err // not found: removed
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("container %s still being removed: %w", short(id), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// RemoveStrays tries again to remove the containers whose removal failed
// (while the daemon was away, say) and returns how many are still left.
func (c *Client) RemoveStrays(ctx context.Context) int {
	c.mu.Lock()
	ids := slices.Collect(maps.Keys(c.strays))
	c.mu.Unlock()
	for _, id := range ids {
		if err := c.Remove(ctx, id); err == nil {
			c.log.Info("removed a container that could not be removed earlier", "container_id", short(id))
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.strays)
}

// Kill sends SIGKILL. A container that is gone or already stopped is fine.
func (c *Client) Kill(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	err := c.api.ContainerKill(ctx, id, "SIGKILL")
	if err != nil && !cerrdefs.IsNotFound(err) && !cerrdefs.IsConflict(err) {
		return fmt.Errorf("kill container %s: %w", short(id), err)
	}
	return nil
}

// IsNotFound reports whether err means the object does not exist.
func IsNotFound(err error) bool { return cerrdefs.IsNotFound(err) }

// unreachable marks a failure to reach the daemon with ErrUnreachable so
// callers can tell "Docker is down" from other failures.
func unreachable(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.EACCES) || strings.Contains(err.Error(), "permission denied while trying to connect"):
		return fmt.Errorf("%w: %w", ErrUnreachable, permissionError{err})
	case client.IsErrConnectionFailed(err):
		return fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	return err
}

// permissionError: the daemon's socket is there but this user may not use it.
type permissionError struct{ cause error }

func (e permissionError) Error() string {
	sock := "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); strings.HasPrefix(h, "unix://") {
		sock = strings.TrimPrefix(h, "unix://")
	}
	return "permission denied on " + sock + ": add your user to the docker group (or set DOCKER_HOST)"
}

// ErrPermission: the daemon's socket exists but this user may not use it.
var ErrPermission = errors.New("permission denied on the Docker socket")

func (e permissionError) Is(target error) bool { return target == ErrPermission }

func labelFilter(labels map[string]string) filters.Args {
	args := filters.NewArgs()
	for k, v := range labels {
		args.Add("label", k+"="+v)
	}
	return args
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
