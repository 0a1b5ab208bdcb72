package images

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"

	"github.com/pybox-dev/pybox/internal/contract"
	"github.com/pybox-dev/pybox/internal/egress"
	"github.com/pybox-dev/pybox/internal/egressdir"
	"github.com/pybox-dev/pybox/internal/engine"
)

// downloadsMount is where the install container finds the files the
// download step fetched (inside its /tmp tmpfs, as wheelhouseMount).
const downloadsMount = "/tmp/downloads"

// maxDownloadBytes bounds what one download step may hand to its install
// (the download container's /tmp holds no more either).
const maxDownloadBytes = 2 << 30

// downloadScript fetches the requirements given as arguments (with pip
// download's options before them) into /tmp/downloads and writes them to
// stdout as a tar stream; pip's own output goes to stderr. It runs in the
// environment's base image, never in a package layer, so no package an
// install added (no .pth, no sitecustomize) runs while the network is on:
// pip comes from the base interpreter, else from its installation
// (sys.prefix without site; the online runtime image's venv has no pip).
// When sdists are allowed it also fetches their build requirements, which
// the offline install needs.
// It reaches the index only through the egress proxy, whose socket the
// forwarder (runner/forward.py, prepended) relays from a loopback port.
var downloadScript = string(forwardPy) + `
import socket, subprocess, sys, tarfile, zipfile
fwd = egress_listen()
if fwd:
    egress_start(*fwd)
print("pybox: downloading through pybox's egress proxy; interfaces: %s" % ",".join(n for _, n in socket.if_nameindex()), file=sys.stderr)
dest = "/tmp/downloads"
os.makedirs(dest)
env = dict(os.environ, PIP_NO_CACHE_DIR="1", PYTHONDONTWRITEBYTECODE="1")
py = next((p for p in (sys.executable, os.path.join(sys.prefix, "bin", "python3")) if subprocess.call(
    [p, "-I", "-c", "import pip"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0), None)
if py is None:
    sys.exit("pybox: the base image has no pip to download packages with")
opts, reqs = sys.argv[1:sys.argv.index("--")], sys.argv[sys.argv.index("--") + 1:]
def download(reqs):
    rc = subprocess.call([py, "-I", "-m", "pip", "download", "--dest", dest, "--no-input", "--disable-pip-version-check",
                          "--progress-bar", "off"] + opts + ["--"] + reqs, stdout=sys.stderr, env=env)
    if rc:
        sys.exit(rc)
def build_requires(path):
    try:
        if path.endswith(".zip"):
            z = zipfile.ZipFile(path); names = z.namelist(); read = z.read
        else:
            t = tarfile.open(path); names = t.getnames(); read = lambda n: t.extractfile(n).read()
        pp = [n for n in names if n.count("/") == 1 and n.endswith("/pyproject.toml")]
        import tomllib
        return tomllib.loads(read(pp[0]).decode())["build-system"]["requires"]
    except Exception:
        return ["setuptools>=40.8.0", "wheel"]
download(reqs)
if "--only-binary" not in opts:
    extra = sorted({r for f in os.listdir(dest) if f.endswith((".tar.gz", ".zip")) for r in build_requires(os.path.join(dest, f))})
    if extra:
        download(extra)
out = tarfile.open(fileobj=sys.stdout.buffer, mode="w|")
for f in sorted(os.listdir(dest)):
    p = os.path.join(dest, f)
    if os.path.isfile(p) and not os.path.islink(p):
        out.add(p, arcname=f)
out.close()
sys.stdout.buffer.flush()
`

// online reports whether installs need the network: an index is
// configured (or none and no wheelhouse: PyPI) and the install network is on.
func (in *Installer) online() bool {
	return in.Index.Network != "none" && (in.Index.URL != "" || in.Index.ExtraURL != "" || in.Index.Wheelhouse == "")
}

// pypiHosts are where pip's default index serves its pages and files.
var pypiHosts = []string{"pypi.org", "files.pythonhosted.org"}

// egressConfig is the download step's proxy: the index hosts (see
// Index.Network) plus Index.Allow, with the operator's other settings.
func (in *Installer) egressConfig() (egress.Config, error) {
	hosts := slices.Clone(in.Index.Allow)
	if in.Index.Network != "allowlist" {
		if in.Index.URL == "" {
			hosts = append(hosts, pypiHosts...)
		}
		for _, u := range []string{in.Index.URL, in.Index.ExtraURL} {
			if h := urlHost(u); h != "" {
				hosts = append(hosts, h)
			}
		}
	}
	cfg := in.Index.Egress
	allow, err := egress.ParseAllowlist(hosts)
	if err != nil {
		return cfg, fmt.Errorf("%w: the install allowlist: %w", ErrInstallFailed, err)
	}
	cfg.Allow = allow
	return cfg, nil
}

// urlHost is u's host[:port] ("" for no URL or none in it).
func urlHost(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return p.Host
}

// download runs the download step for l: a container from the
// environment's base image on the install network fetches l's
// requirements, and pybox unpacks them into dir (flat, regular files
// only, at most maxDownloadBytes). It returns the step's output.
func (in *Installer) download(ctx context.Context, env Environment, l layer, wheelhouse, dir string) (string, error) {
	out := &tailBuffer{max: 16 << 10}
	pr, pw := io.Pipe()
	unpacked := make(chan error, 1)
	go func() {
		err := unpackFlat(pr, dir, maxDownloadBytes)
		_, _ = io.Copy(io.Discard, pr) // let the container's output end whatever happened
		unpacked <- err
	}()
	in.log().Info("downloading packages", "specs", l.specs, "base", env.BaseImage, "key", l.key[:12])
	proxy, err := in.startEgress()
	if err != nil {
		pw.Close()
		<-unpacked
		return "", err
	}
	exit, err := in.Engine.Run(ctx, in.downloadSpec(env, l, wheelhouse, proxy.Dir(), pw, out))
	pw.Close()
	uerr := <-unpacked
	if rep, cerr := proxy.Close(); cerr == nil && (len(rep.Destinations) > 0 || rep.Dropped > 0) {
		fmt.Fprintf(out, "network: %s\n", rep)
	}
	switch {
	case err != nil && exit == (engine.Exit{}):
		return out.String(), fmt.Errorf("%w: the download container could not run (%v)", ErrInstallFailed, err)
	case err != nil:
		return out.String(), err
	case exit.TimedOut:
		return out.String(), fmt.Errorf("%w: the download timed out after %v", ErrInstallFailed, in.timeout())
	case exit.OOMKilled:
		return out.String(), fmt.Errorf("%w: the download ran out of memory", ErrInstallFailed)
	case exit.Code != 0:
		return out.String(), fmt.Errorf("%w: downloading the packages failed (exit status %d)%s", ErrInstallFailed, exit.Code, in.sdistHint(out.String()))
	case uerr != nil:
		return out.String(), fmt.Errorf("%w: the downloaded packages: %w", ErrInstallFailed, uerr)
	}
	return out.String(), nil
}

// startEgress starts the download step's proxy in a private folder.
func (in *Installer) startEgress() (*egressdir.Run, error) {
	cfg, err := in.egressConfig()
	if err != nil {
		return nil, err
	}
	r, err := egressdir.Start("", cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInstallFailed, err)
	}
	return r, nil
}

// downloadSpec is the download container: the base image, read-only, as
// the install user with the installs' hardening and limits, network none
// with the egress proxy's folder proxy mounted, the wheelhouse (when there
// is one) read-only.
func (in *Installer) downloadSpec(env Environment, l layer, wheelhouse, proxy string, stdout, stderr io.Writer) engine.Spec {
	argv := append(slices.Clone(env.Python()), "-I", "-S", "-c", "exec("+strconv.Quote(downloadScript)+")")
	argv = append(append(append(argv, in.indexArgs(wheelhouse != "", false)...), in.binaryArgs("pip")...), "--")
	argv = append(argv, l.specs...)
	spec := in.installSpec(env, l, &staging{}, stdout, stderr)
	spec.Name = in.Owner.ContainerName("download")
	spec.Config = &container.Config{Image: l.base.ID, Cmd: argv, User: InstallUser, Env: append(slices.Clone(installEnv), egressdir.Env+"="+egressdir.SocketPath()),
		Labels: in.Owner.Labels("install"), NetworkDisabled: true, AttachStdout: true, AttachStderr: true}
	host := *spec.Host
	host.NetworkMode = contract.Hardened("none").NetworkMode
	host.ReadonlyRootfs = true
	host.Mounts = []mount.Mount{{Type: mount.TypeBind, Source: proxy, Target: egressdir.Mount, ReadOnly: true}}
	if wheelhouse != "" {
		host.Mounts = append(host.Mounts, mount.Mount{Type: mount.TypeBind, Source: wheelhouse, Target: wheelhouseMount, ReadOnly: true})
	}
	spec.Host = &host
	return spec
}

// unpackFlat extracts the regular files of a tar stream into dir, which
// must exist: plain names only (no folders, links or dot files), readable
// by all, at most max bytes in all.
func unpackFlat(r io.Reader, dir string, max int64) error {
	tr := tar.NewReader(r)
	var total int64
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the download stream: %w", err)
		}
		name := hdr.Name
		if hdr.Typeflag != tar.TypeReg || name != filepath.Base(name) || strings.HasPrefix(name, ".") {
			return fmt.Errorf("unexpected entry %.80q in the download stream", name)
		}
		if total += hdr.Size; total > max {
			return fmt.Errorf("the downloads exceed %d MiB", max>>20)
		}
		if err := writeFile(filepath.Join(dir, name), io.LimitReader(tr, hdr.Size)); err != nil {
			return err
		}
	}
}

// writeFile creates path (which must not exist) with r's content, mode 0644.
func writeFile(path string, r io.Reader) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("stage %s: %w", filepath.Base(path), err)
	}
	_, werr := io.Copy(f, r)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		return fmt.Errorf("stage %s: %w", filepath.Base(path), err)
	}
	return os.Chmod(path, 0o644) // whatever the umask
}
