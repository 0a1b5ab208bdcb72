// Package images builds the pybox runtime image.
//
// The runtime image is built from Dockerfile.runtime (embedded from the
// repository root) on one of two bases:
//
//   - online: the official python:3.12-slim-bookworm image with uv copied in
//     from ghcr.io/astral-sh/uv (needs a container registry and, for the
//     datascience variant, PyPI);
//   - offline: a Debian bookworm root filesystem made with debootstrap and
//     imported with `docker import` (needs a Debian mirror, debootstrap and
//     root; uv is then absent and pip is the installer).
//
// Whatever the base, the image has the same layout, which the sandbox relies
// on: a venv at /opt/venv (VenvPython), the
// non-root SandboxUser and the Workdir. Each image carries the label
// LabelDigest, a hash of everything that went into it, so Ensure can tell a
// current image from a stale one and rebuild only when needed.
//
// Lifecycle: fill a Builder (zero fields mean the documented defaults) and
// call Ensure at start-up, or Build to force a rebuild. A Builder is safe for
// concurrent use once filled and must not be copied after first use;
// concurrent Ensure calls for one variant share a single build, and builds
// of one variant in separate processes (two servers, parallel test packages)
// wait for each other through a lock file, so the second finds the image the
// first built.
//
// Environments and package layers: a Manager holds the active Environment
// (started with Start, switched with Configure, grown with Install) and
// persists it, with the last state of every lineage, in a state file that
// several servers may share; failing to write it is logged, not fatal. An
// Installer commits each install as a content-addressed layer image. An
// install is no more trusted than user code: its container runs as the
// unprivileged InstallUser with the runs' hardening, installs wheels only
// unless Index.AllowSdist, and is committed only when every path it
// changed lies in the package directories the environment's interpreter
// reported before the installer ran (packageDirs.allows). Both
// are safe for concurrent use: environment changes run one at a time, and
// identical concurrent installs share one container.
//
// All Docker calls go through internal/engine.
package images
