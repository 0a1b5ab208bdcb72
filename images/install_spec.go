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
// /tmp and /var/tmp), no workspace, no network, the wheelhouse and the
// download step's files read-only. The root filesystem stays writable, since the
// container is committed; what the install may change there is bounded
// by file ownership and checked before the commit (packageDirs.allows).
// No init process: its mount point would be a change of the container.
// Nothing else of the configuration that a commit would keep (working
// directory, stop signal) differs from the image's.
func (in *Installer) installSpec(env Environment, l layer, st *staging, stdout, stderr io.Writer) engine.Spec {
	cfg := &container.Config{
		Image: l.parent.ID, Cmd: in.command(env, l, st.downloads != ""), User: InstallUser, Env: installEnv,
		Labels: in.Owner.Labels("install"), NetworkDisabled: true, AttachStdout: true, AttachStderr: true,
	}
	// No network: what an index serves was fetched by the download step
	// (see Installer.download), so the packages of the environment, which
	// run here (.pth files, the installer's imports), never reach one.
	// A writable root: the install is committed as the layer.
	host := contract.Hardened("none")
	// exec: build backends may run what they compile (configure checks).
	host.Tmpfs = map[string]string{"/tmp": "rw,exec,nosuid,nodev,size=2g,mode=1777", "/var/tmp": "rw,nosuid,nodev,size=256m,mode=1777"}
	host.Resources = container.Resources{
		Memory: installMemory, MemorySwap: installMemory, NanoCPUs: installCPUs, PidsLimit: ptrInt(installPids),
		Ulimits: []*units.Ulimit{{Name: "nofile", Soft: installFiles, Hard: installFiles}, {Name: "core", Soft: 0, Hard: 0}},
	}
	if st.wheelhouse != "" {
		host.Mounts = append(host.Mounts, mount.Mount{Type: mount.TypeBind, Source: st.wheelhouse, Target: wheelhouseMount, ReadOnly: true})
	}
	if st.downloads != "" {
		host.Mounts = append(host.Mounts, mount.Mount{Type: mount.TypeBind, Source: st.downloads, Target: downloadsMount, ReadOnly: true})
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
