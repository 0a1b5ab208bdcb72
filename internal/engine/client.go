package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
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
	log *slog.Logger

	amu    sync.Mutex     // guards api and choice
	api    *client.Client // replaced when a later discovery finds the engine
	choice Choice

	mu     sync.Mutex
	strays map[string]bool // containers whose removal failed: RemoveStrays tries again
	kind   flavor          // Docker or Podman, once known
}

// New connects to the engine Discover finds in this process's
// environment (see Candidates for where it looks), with API version
// negotiation. It pings the places it tries, each for at most a few
// seconds; when none answers it still returns a client, at the platform's
// default, whose failures carry the report of every place tried.
func New(log *slog.Logger) (*Client, error) {
	ch := Discover(context.Background(), Env{})
	c, err := newClient(ch, log)
	if err == nil {
		c.log.Debug("container engine", "host", ch.Host, "why", ch.Why())
	}
	return c, err
}

// NewAt connects to the daemon at host (a DOCKER_HOST value, such as
// Podman's socket) instead of the environment's.
func NewAt(host string, log *slog.Logger) (*Client, error) {
	c := Candidate{Host: host, Source: "the given host", Explicit: true, FromEnv: true}
	var ch Choice
	ch.settle(c, true)
	return newClient(ch, log)
}

func newClient(ch Choice, log *slog.Logger) (*Client, error) {
	api, err := newAPI(ch.chosen)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Client{api: api, choice: ch, log: log, strays: map[string]bool{}}, nil
}

// cli is the API client in use.
func (c *Client) cli() *client.Client {
	c.amu.Lock()
	defer c.amu.Unlock()
	return c.api
}

// Choice is where the client looked for the engine and what it chose.
func (c *Client) Choice() Choice {
	c.amu.Lock()
	defer c.amu.Unlock()
	return c.choice
}

// Close releases the client's connections.
func (c *Client) Close() error { return c.cli().Close() }

// rediscover looks again when no engine answered at the start and none was
// named: a desktop engine started after pybox is found without a restart.
func (c *Client) rediscover(ctx context.Context) bool {
	if ch := c.Choice(); ch.Found || ch.chosen.Explicit {
		return false
	}
	ch := Discover(ctx, Env{})
	if !ch.Found {
		return false
	}
	api, err := newAPI(ch.chosen)
	if err != nil {
		return false
	}
	c.amu.Lock()
	old := c.api
	c.api, c.choice = api, ch
	c.amu.Unlock()
	c.log.Info("container engine found", "host", ch.Host, "why", ch.Why())
	_ = old.Close() // idle connections to a host that did not answer
	return true
}

// Version describes the daemon.
type Version struct {
	Server     string   // engine version, e.g. 20.10.24
	APIVersion string   // negotiated API version
	Runtimes   []string // OCI runtimes the daemon knows (runc, crun, runsc, ...)
}

// Ping checks that the daemon answers and returns its version and runtimes.
func (c *Client) Ping(ctx context.Context) (Version, error) {
	if _, err := c.cli().Ping(ctx); err != nil {
		before := c.cli()
		uerr := c.unreachable(err, true) // looks again when no engine answered before
		if c.cli() != before {
			return c.Ping(ctx) // found since
		}
		return Version{}, uerr
	}
	sv, err := c.cli().ServerVersion(ctx)
	if err != nil {
		return Version{}, c.unreachable(err, true)
	}
	v := Version{Server: sv.Version, APIVersion: c.cli().ClientVersion()}
	info, err := c.cli().Info(ctx)
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
	list, err := c.cli().ContainerList(ctx, container.ListOptions{All: true, Filters: labelFilter(labels)})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", c.unreachable(err, false))
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
	err := c.cli().ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	// Podman refuses while the container is between states ("container
	// state improper", as it stops on its own): a moment later it goes.
	for i := 0; err != nil && i < 20 && strings.Contains(err.Error(), "state improper") && ctx.Err() == nil; i++ {
		time.Sleep(50 * time.Millisecond)
		err = c.cli().ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	}
	if err != nil && cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "already in progress") {
		err = c.awaitRemoval(ctx, id) // the daemon is removing it (AutoRemove): it is ours once gone
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil && !cerrdefs.IsNotFound(err) {
		c.strays[id] = true // the daemon away, say: RemoveStrays tries again
		return fmt.Errorf("remove container %s: %w", short(id), c.unreachable(err, false))
	}
	delete(c.strays, id)
	return nil
}

// awaitRemoval waits until container id no longer exists.
func (c *Client) awaitRemoval(ctx context.Context, id string) error {
	for {
		_, err := c.cli().ContainerInspect(ctx, id)
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
	err := c.cli().ContainerKill(ctx, id, "SIGKILL")
	if err != nil && !cerrdefs.IsNotFound(err) && !cerrdefs.IsConflict(err) {
		return fmt.Errorf("kill container %s: %w", short(id), err)
	}
	return nil
}

// IsNotFound reports whether err means the object does not exist.
func IsNotFound(err error) bool { return cerrdefs.IsNotFound(err) }

// unreachable marks a failure to reach the daemon with ErrUnreachable so
// callers can tell "Docker is down" from other failures; its text is the
// report of where the engine was looked for. With any, every failure
// counts as unreachable (a ping), else only a failed connection.
func (c *Client) unreachable(err error, any bool) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.EACCES) || strings.Contains(err.Error(), "permission denied while trying to connect"):
		return fmt.Errorf("%w: %w", ErrUnreachable, permissionError{c.Choice().Host, err})
	case any || client.IsErrConnectionFailed(err):
		text := c.Choice().Report(err)
		c.rediscover(context.Background()) // an engine started since: the next call uses it
		return &UnreachableError{Text: text, Cause: err}
	}
	return err
}

// permissionError: the daemon's socket is there but this user may not use it.
type permissionError struct {
	host  string
	cause error
}

func (e permissionError) Error() string {
	sock := strings.TrimPrefix(e.host, "unix://")
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
