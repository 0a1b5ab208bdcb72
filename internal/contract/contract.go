// Package contract is what every pybox container and runtime image agree
// on: the paths inside (workspace, venv, PATH), the users, the labels
// that say whose a container is, and the hardening every container starts
// from. It is a leaf: sandbox (runs, sessions, probes) and images (builds,
// installs) both build on it, so the contract is written once.
package contract

import "github.com/docker/docker/api/types/container"

// Paths inside every container.
const (
	Workspace  = "/workspace"                 // the working directory: code storage, a session's folder, or a tmpfs
	VenvDir    = "/opt/venv"                  // the runtime image's venv
	VenvPython = VenvDir + "/bin/python"      // its interpreter
	Path       = VenvDir + "/bin:" + basePath // PATH of every image and container
	basePath   = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// Users of the runtime image.
const (
	SandboxUser = "10001:10001" // uid:gid programs run as (unless storage is a regular user's)
	InstallUser = "10002:10002" // uid:gid installs run as; owns only the venv's package directories
)

// The uids containers get one each (when the server runs as root with
// SandboxUser; see sandbox.Config.SharedUID), in SandboxUser's group: the
// kernel charges inotify instances and pipe buffers per uid, so each
// sandbox has its own budget. The range lies above the subordinate ids
// useradd hands out (up to 600100000) and systemd-nspawn's container
// range (up to 0x6FFFFFFF), below systemd's foreign range (0x7FFE0000)
// and 2^31: no host account uses it.
const (
	SandboxUIDBase  = 0x70000000 // 1879048192
	SandboxUIDCount = 1 << 24
)

// Labels of pybox's containers (and, with LabelManaged "image", of its
// package-layer images).
const (
	LabelManaged = "pybox.managed" // "true" on containers
	LabelOwner   = "pybox.owner"   // the instance that created it
	LabelLease   = "pybox.lease"   // that instance's lease file (absolute path); empty without a lease dir
	LabelHost    = "pybox.host"    // hostname of that instance (information only)
	LabelPID     = "pybox.pid"     // its process id in its own PID namespace (information only)
	LabelRole    = "pybox.role"    // run, pool, session, probe, install
	LabelUID     = "pybox.uid"     // the container's own uid (SandboxUIDBase...); empty when it has none
)

// InstanceLabels tie a container to the instance that made it (and to its
// own uid). Every container pybox creates sets each of them, empty when it
// has none (no lease folder, no uid of its own), so that one inherited from
// its image (a package layer, a user's image) never stands for it; a
// package layer's commit clears them all.
var InstanceLabels = []string{LabelOwner, LabelLease, LabelHost, LabelPID, LabelRole, LabelUID}

// Hardened is the host configuration every pybox container starts from:
// no capabilities, no privilege escalation, a private IPC namespace, no
// docker-init (pybox's runner is PID 1 itself), no logging, and network
// (none unless an install is configured otherwise). Callers add their
// mounts, tmpfs and resources.
func Hardened(network string) *container.HostConfig {
	init := false
	return &container.HostConfig{
		NetworkMode: container.NetworkMode(network),
		CapDrop:     []string{"ALL"},
		SecurityOpt: []string{"no-new-privileges"},
		IpcMode:     "private",
		Init:        &init,
		LogConfig:   container.LogConfig{Type: "none"},
	}
}
