package engine

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/go-units"
)

// flavor is what kind of daemon answers on the socket, learnt once.
type flavor struct {
	known    bool
	podman   bool // Podman's Docker-compatible API
	rootless bool // Podman without root: container uids map into the user's subuid range
	cgroupV1 bool // the host's cgroups are v1: rootless Podman cannot set limits there
}

// flavor asks the daemon what it is, once it answers.
func (c *Client) flavor(ctx context.Context) flavor {
	c.mu.Lock()
	f := c.kind
	c.mu.Unlock()
	if f.known {
		return f
	}
	sv, err := c.cli().ServerVersion(ctx)
	if err != nil {
		return flavor{}
	}
	f.known = true
	for _, comp := range sv.Components {
		if strings.Contains(comp.Name, "Podman") {
			f.podman = true
		}
	}
	if f.podman {
		f.rootless, f.cgroupV1 = c.podmanInfo(ctx)
	}
	c.mu.Lock()
	c.kind = f
	c.mu.Unlock()
	return f
}

// Limits pybox asks Podman for when a request sets none: Podman's
// defaults for processes (per uid, host-wide, as the kernel counts them)
// and open files are above what its own hard limits let it grant on many
// hosts, and its runc then refuses to start the container (attach answers
// 409). Docker passes its own limits through unchanged, so there pybox
// adds none; the pids cgroup limit bounds each sandbox either way.
const (
	podmanNProc  = 16384
	podmanNoFile = 65536
)

// adapt makes a container request one the daemon can honour: for Podman,
// explicit nproc and nofile limits (never above this process's own hard
// limits) and, rootless, the caller's uid kept inside (keep-id), so a
// sandbox running as the caller can write its bind-mounted workspace.
func (c *Client) adapt(ctx context.Context, host *container.HostConfig) error {
	f := c.flavor(ctx)
	if host == nil || !f.podman {
		return nil
	}
	if f.rootless && f.cgroupV1 && (host.Memory > 0 || host.NanoCPUs > 0 || host.PidsLimit != nil) {
		return ErrLimitsUnenforced
	}
	host.Ulimits = withLimit(host.Ulimits, "nproc", podmanNProc)
	host.Ulimits = withLimit(host.Ulimits, "nofile", podmanNoFile)
	for target, opts := range host.Tmpfs {
		host.Tmpfs[target] = podmanTmpfs(opts)
	}
	if f.rootless && host.UsernsMode == "" {
		host.UsernsMode = "keep-id"
	}
	return nil
}

// ErrLimitsUnenforced: the daemon would start the container without its
// memory, CPU and process limits, so pybox does not ask it to.
var ErrLimitsUnenforced = errors.New("rootless Podman on a host with cgroup v1 cannot enforce memory, CPU or process limits (it starts containers without them), " +
	"so pybox will not run sandboxes there: use rootful Podman, Docker, or a host with cgroup v2")

// withLimit adds the ulimit name at n, capped by this process's own hard
// limit (see hardLimit), unless ulimits already has it.
func withLimit(ulimits []*units.Ulimit, name string, n int64) []*units.Ulimit {
	for _, u := range ulimits {
		if u.Name == name {
			return ulimits
		}
	}
	if max, ok := hardLimit(name); ok && max < uint64(n) {
		n = int64(max)
	}
	return append(slices.Clip(ulimits), &units.Ulimit{Name: name, Soft: n, Hard: n})
}

// podmanTmpfs rewrites tmpfs options for Podman 4, which refuses uid=,
// gid= and nr_inodes=: a tmpfs owned by a uid becomes one owned by the
// container's user (U), which is the same user for pybox's containers; the
// inode cap is dropped (the size cap, and the memory limit that tmpfs pages
// count against, still bound it).
func podmanTmpfs(opts string) string {
	var out []string
	owned := false
	for _, o := range strings.Split(opts, ",") {
		switch k, _, _ := strings.Cut(o, "="); k {
		case "uid", "gid":
			owned = true
		case "nr_inodes":
		default:
			out = append(out, o)
		}
	}
	if owned {
		out = append(out, "U")
	}
	return strings.Join(out, ",")
}

// podmanInfo asks Podman's own API (its compat info does not say) whether
// it runs without root, and on which cgroup version.
func (c *Client) podmanInfo(ctx context.Context) (rootless, cgroupV1 bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://podman/v4.0.0/libpod/info", nil)
	if err != nil {
		return false, false
	}
	resp, err := c.cli().HTTPClient().Do(req)
	if err != nil {
		c.log.Warn("could not ask Podman whether it is rootless", "err", err)
		return false, false
	}
	defer resp.Body.Close()
	var info struct {
		Host struct {
			CgroupVersion string `json:"cgroupVersion"`
			Security      struct {
				Rootless bool `json:"rootless"`
			} `json:"security"`
		} `json:"host"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&info); err != nil {
		return false, false
	}
	return info.Host.Security.Rootless, info.Host.CgroupVersion == "v1"
}
