package images

import (
	"io"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/go-units"

	"github.com/pybox-dev/pybox/internal/contract"
	"github.com/pybox-dev/pybox/internal/engine"
)

// Install container limits: more than a run gets (builds and large wheels
// need them), bounded all the same.
const (
	installMemory = 2 << 30 // bytes, swap included; the tmpfs /tmp counts against it
	installCPUs   = 2e9     // nano-CPUs
	installPids   = 512
	installFiles  = 4096 // open files
)

// installEnv is the install container's environment (besides the
// image's): HOME on the tmpfs. It is kept short because a commit keeps the
// container's environment in the layer's config; what only the installer
// needs, dirsWrapper sets (wrapperEnv).
var installEnv = []string{"HOME=/tmp", "LANG=C.UTF-8", "PATH=" + contract.Path}

// installSpec is the install container: the parent image run as the
// unprivileged InstallUser with the runs' hardening (no capabilities,
// no-new-privileges, memory, CPU, pids and ulimits, private IPC, tmpfs
// /tmp and /var/tmp), no workspace, the wheelhouse read-only, and the
// configured network. The root filesystem stays writable, since the
// container is committed; what the install may change there is bounded
// by file ownership and checked before the commit (packageDirs.allows).
// No init process: its mount point would be a change of the container.
// Nothing else of the configuration that a commit would keep (working
// directory, stop signal) differs from the image's.
func (in *Installer) installSpec(env Environment, l layer, stdout, stderr io.Writer) engine.Spec {
	network := orDefaultString(in.Index.Network, "bridge")
	cfg := &container.Config{
		Image: l.parent.ID, Cmd: in.command(env, l), User: InstallUser, Env: installEnv,
		Labels: in.Owner.Labels("install"), NetworkDisabled: network == "none", AttachStdout: true, AttachStderr: true,
	}
	// A writable root: the install is committed as the layer.
	host := contract.Hardened(network)
	// exec: build backends may run what they compile (configure checks).
	host.Tmpfs = map[string]string{"/tmp": "rw,exec,nosuid,nodev,size=2g,mode=1777", "/var/tmp": "rw,nosuid,nodev,size=256m,mode=1777"}
	host.Resources = container.Resources{
		Memory: installMemory, MemorySwap: installMemory, NanoCPUs: installCPUs, PidsLimit: ptrInt(installPids),
		Ulimits: []*units.Ulimit{{Name: "nofile", Soft: installFiles, Hard: installFiles}, {Name: "core", Soft: 0, Hard: 0}},
	}
	if in.Index.Wheelhouse != "" {
		host.Mounts = []mount.Mount{{Type: mount.TypeBind, Source: in.Index.Wheelhouse, Target: wheelhouseMount, ReadOnly: true}}
	}
	return engine.Spec{Name: in.Owner.ContainerName("install"), Config: cfg, Host: host, Stdout: stdout, Stderr: stderr, Timeout: in.timeout()}
}

func (in *Installer) timeout() time.Duration {
	if in.Timeout > 0 {
		return in.Timeout
	}
	return 10 * time.Minute
}

func ptrInt(v int64) *int64 { return &v }
