package sandbox

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/go-units"

	"github.com/pybox-dev/pybox/internal/contract"
	"github.com/pybox-dev/pybox/internal/egressdir"
)

// WorkspaceMount is where the code-storage directory appears in a container.
const WorkspaceMount = contract.Workspace

// Plan is everything that shapes one container; ContainerConfig turns it
// into the Docker configuration.
type Plan struct {
	Image     string
	Cmd       []string
	User      string            // "uid:gid", never root
	Env       map[string]string // the complete environment: nothing else leaks in
	Workspace string            // host directory mounted read-write at /workspace; "" = none
	Scratch   bool              // without Workspace: /workspace is a tmpfs of Limits.WorkspaceBytes
	Outputs   *Outputs          // the run's private output folder, mounted over its place in the workspace
	// SessionOutputs is a session's private output area (a host folder),
	// mounted at SessionOutputsMount; "" = none.
	SessionOutputs string
	// Egress is the run's egress proxy folder (a host folder), mounted
	// read-only at egressdir.Mount; "" = none (no network at all).
	Egress  string
	Labels  map[string]string
	Runtime string // OCI runtime; "" = the daemon's default
	Stdin   bool   // attach stdin
	// Runner is what pybox writes first on stdin, before it speaks to the
	// runner: the runner itself, which Cmd's bootstrap reads and runs
	// (images.RunnerArgs); nil when Cmd is no runner (a probe).
	Runner []byte
	// LearnRunner, when set, is the key under which the runner's code,
	// compiled and sent back with its ready frame (Runner asks for it:
	// images.RunnerFrame), starts the next containers (runnerCache).
	LearnRunner string
	Limits      Limits // with defaults applied
}

// ContainerConfig is the pure mapping from a plan to the hardened Docker
// configuration (network none and disabled, all capabilities dropped,
// no-new-privileges, read-only root with a sized /tmp, memory without extra
// swap, CPU quota, pids limit, ulimits, no logging, SIGKILL stop). There is
// no docker-init: the runner is PID 1 itself (it reaps, and it must be the
// only process holding the container's streams, which carry its channel).
func ContainerConfig(p Plan) (*container.Config, *container.HostConfig) {
	cfg := &container.Config{
		Image:           p.Image,
		Cmd:             p.Cmd,
		User:            p.User,
		Env:             envList(p.Env),
		WorkingDir:      WorkspaceMount,
		Labels:          p.Labels,
		NetworkDisabled: true,
		StopSignal:      "SIGKILL",
		AttachStdout:    true,
		AttachStderr:    true,
		AttachStdin:     p.Stdin,
		OpenStdin:       p.Stdin,
		StdinOnce:       p.Stdin,
	}
	l := p.Limits
	host := contract.Hardened("none")
	host.ReadonlyRootfs = true
	host.Runtime = p.Runtime
	host.Tmpfs = map[string]string{"/tmp": fmt.Sprintf("rw,nosuid,nodev,size=%d,mode=1777", l.TmpBytes)}
	host.Resources = container.Resources{
		Memory:     l.Memory,
		MemorySwap: l.Memory, // equal: no swap beyond the memory limit
		NanoCPUs:   int64(l.CPUs * 1e9),
		PidsLimit:  ptr(pidsLimit(l.Pids, p.Runtime)),
		Ulimits: []*units.Ulimit{
			{Name: "nofile", Soft: l.OpenFiles, Hard: l.OpenFiles},
			{Name: "fsize", Soft: l.FileBytes, Hard: l.FileBytes},
			{Name: "core", Soft: 0, Hard: 0},
		},
	}
	if p.Workspace == "" && p.Scratch {
		// Owned by the program's user (Docker ignores a mode on the image's
		// working directory).
		uid, gid, _ := strings.Cut(p.User, ":")
		host.Tmpfs[WorkspaceMount] = fmt.Sprintf("rw,nosuid,nodev,size=%d,nr_inodes=%d,uid=%s,gid=%s,mode=0700", l.WorkspaceBytes, l.WorkspaceFiles, uid, gid)
	}
	if p.Workspace != "" {
		host.Mounts = []mount.Mount{{Type: mount.TypeBind, Source: p.Workspace, Target: WorkspaceMount}}
	}
	if p.Workspace != "" && p.Outputs != nil {
		host.Mounts = append(host.Mounts, mount.Mount{Type: mount.TypeBind, Source: p.Outputs.Dir, Target: p.Outputs.Path()})
	}
	if p.SessionOutputs != "" {
		host.Mounts = append(host.Mounts, mount.Mount{Type: mount.TypeBind, Source: p.SessionOutputs, Target: SessionOutputsMount})
	}
	if p.Egress != "" {
		host.Mounts = append(host.Mounts, mount.Mount{Type: mount.TypeBind, Source: p.Egress, Target: egressdir.Mount, ReadOnly: true})
	}
	return cfg, host
}

// pidsLimit is the container's pids limit for a limit of pids guest
// processes and threads. Under gVisor the cgroup counts the sandbox's own
// host tasks (the sentry's threads, the gofer, a stub per guest process),
// and passing it aborts the whole sandbox: runsc gets twice the limit plus
// 64, which leaves about the same room for programs (128 → 320: a fork
// bomb is stopped after ~140 processes, where runc allows 128).
func pidsLimit(pids int64, runtime string) int64 {
	if runtime == "runsc" {
		return 2*pids + 64
	}
	return pids
}

// envList renders env sorted by key, so the mapping is deterministic.
func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

func ptr[T any](v T) *T { return &v }
