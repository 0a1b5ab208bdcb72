package images

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/pybox-dev/pybox/internal/contract"
	"github.com/pybox-dev/pybox/internal/engine"
)

const (
	defaultMirror = "http://deb.debian.org/debian"
	debianSuite   = "bookworm"
	rootfsRepo    = "pybox-rootfs"
	// envPath is the PATH of every image, base and runtime alike.
	envPath = contract.Path
)

// errImportEnded tells the tar writer that the daemon stopped reading.
var errImportEnded = errors.New("image import ended")

// buildOffline builds the runtime image on a fresh debootstrap of Debian.
func (b *Builder) buildOffline(ctx context.Context, variant string) (engine.Image, error) {
	if err := checkOffline(); err != nil {
		return engine.Image{}, err
	}
	tag := b.rootfsTag(variant)
	old, hadOld, err := b.Engine.InspectImage(ctx, tag)
	if err != nil {
		return engine.Image{}, err
	}
	if err := b.importDebian(ctx, variant, tag); err != nil {
		return engine.Image{}, err
	}
	ssp := "0"
	if variant == VariantDatascience {
		ssp = "1"
	}
	img, err := b.buildRuntime(ctx, runtimeBuild{
		variant: variant, mode: modeOffline, base: tag, installer: "pip",
		args: map[string]string{"SYSTEM_SITE_PACKAGES": ssp, "PACKAGES": ""},
	})
	if err == nil && hadOld {
		// Usually already pruned with the superseded runtime image.
		b.removeSuperseded(ctx, old.ID, tag)
	}
	return img, err
}

// checkOffline tells up front what an offline build is missing.
func checkOffline() error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("offline image build needs Linux (debootstrap), not %s", runtime.GOOS)
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		return fmt.Errorf("offline image build needs debootstrap: install it with `apt-get install debootstrap`: %w", err)
	}
	if os.Geteuid() != 0 {
		return errors.New("offline image build needs root (debootstrap creates device nodes and chroots): run it as root, e.g. with sudo")
	}
	return nil
}

// rootfsTag is the tag of the Debian base of variant's offline build.
func (b *Builder) rootfsTag(variant string) string {
	repo := rootfsRepo
	if b.Repo != "" {
		repo = b.Repo + "-rootfs"
	}
	return repo + ":" + debianSuite + "-" + variant
}

// offlineRecipe describes how the offline base of variant is made.
func offlineRecipe(variant string) string {
	r := "debootstrap " + strings.Join(debootstrapArgs("DIR", "MIRROR"), " ")
	if pkgs := aptPackages(variant); len(pkgs) > 0 {
		r += " && chroot DIR apt-get " + strings.Join(aptInstallArgs(pkgs), " ")
	}
	return r
}

// debootstrapArgs are the arguments of the debootstrap every variant starts
// from: Python with venv and pip. The variant's own packages are added with
// apt afterwards (aptPackages), because debootstrap resolves an alternative
// by taking its first choice. The variant is unused (kept for the callers
// in tests).
func debootstrapArgs(dir, mirror string) []string {
	return []string{"--variant=minbase", "--include=python3,python3-venv,python3-pip", debianSuite, dir, mirror}
}

// aptPackages are installed with apt into the debootstrapped root of
// variant. python3-munkres satisfies python3-fonttools' "python3-scipy |
// python3-munkres", so scipy and a compiler toolchain stay out.
func aptPackages(variant string) []string {
	if variant == VariantDatascience {
		return []string{"python3-munkres", "python3-numpy", "python3-pandas", "python3-matplotlib"}
	}
	return nil
}

// aptInstallArgs are the apt-get arguments that install pkgs. Without a pty
// for dpkg, the chroot needs no /dev/pts.
func aptInstallArgs(pkgs []string) []string {
	return append([]string{"-o", "Dpkg::Use-Pty=0", "install", "-y", "--no-install-recommends"}, pkgs...)
}

// importDebian debootstraps Debian into a temporary directory, trims it and
// imports it as the image tag. The directory is removed whatever happens.
func (b *Builder) importDebian(ctx context.Context, variant, tag string) (err error) {
	dir, err := os.MkdirTemp(b.TempDir, "pybox-rootfs-")
	if err != nil {
		return fmt.Errorf("debootstrap directory: %w", err)
	}
	defer func() {
		if rerr := removeTree(dir); rerr != nil {
			b.log().Error("debootstrap directory not removed", "dir", dir, "err", rerr)
			err = errors.Join(err, rerr)
		}
	}()
	target := filepath.Join(dir, "rootfs")
	if err := b.debootstrap(ctx, variant, target); err != nil {
		return err
	}
	if err := b.aptInstall(ctx, variant, target); err != nil {
		return err
	}
	if err := trimRootfs(target); err != nil {
		return err
	}
	return b.importTree(ctx, target, tag)
}

// debootstrap runs debootstrap into target, keeping the tail of its output
// for the error.
func (b *Builder) debootstrap(ctx context.Context, variant, target string) error {
	mirror := b.Mirror
	if mirror == "" {
		mirror = defaultMirror
	}
	b.progressf("pybox: debootstrap %s for %s from %s (about a minute)...", debianSuite, variant, mirror)
	start := time.Now()
	out := &tailBuffer{max: 2048}
	cmd := exec.CommandContext(ctx, "debootstrap", debootstrapArgs(target, mirror)...)
	cmd.Stdout, cmd.Stderr = out, out
	// SIGTERM first so debootstrap's exit trap unmounts /proc in the target.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("debootstrap %s stopped: %w", debianSuite, context.Cause(ctx))
		}
		logTail := readTail(filepath.Join(target, "debootstrap", "debootstrap.log"), 2048)
		return fmt.Errorf("debootstrap %s from %s: %w\n%s%s", debianSuite, mirror, err, out, logTail)
	}
	d := time.Since(start).Round(time.Second)
	b.log().Info("debootstrap done", "variant", variant, "duration_ms", time.Since(start).Milliseconds())
	b.progressf("pybox: debootstrap done in %s", d)
	return nil
}

// policyRcD forbids maintainer scripts to start services in the chroot.
const policyRcD = "#!/bin/sh\nexit 101\n"

// aptInstall installs the apt packages of variant, if any, into root, a
// fresh debootstrap, from the sources.list and package lists debootstrap
// wrote for the mirror. Services may not start meanwhile. Nothing is
// mounted: apt and these packages' maintainer scripts need no /proc.
func (b *Builder) aptInstall(ctx context.Context, variant, root string) error {
	pkgs := aptPackages(variant)
	if len(pkgs) == 0 {
		return nil
	}
	b.progressf("pybox: apt-get install %s...", strings.Join(pkgs, " "))
	start := time.Now()
	policy := filepath.Join(root, "usr", "sbin", "policy-rc.d")
	if err := os.WriteFile(policy, []byte(policyRcD), 0o755); err != nil {
		return fmt.Errorf("policy-rc.d: %w", err)
	}
	if err := chrootApt(ctx, root, aptInstallArgs(pkgs)); err != nil {
		return err
	}
	if err := os.Remove(policy); err != nil {
		return fmt.Errorf("policy-rc.d: %w", err)
	}
	b.log().Info("apt install done", "variant", variant, "duration_ms", time.Since(start).Milliseconds())
	b.progressf("pybox: apt-get install done in %s", time.Since(start).Round(time.Second))
	return nil
}

// chrootApt runs apt-get with args in root, keeping the tail of its output
// for the error. apt-get and dpkg run in a process group of their own,
// signalled whole on cancellation and killed whole on failure, so nothing
// goes on writing into a tree that is about to be removed.
func chrootApt(ctx context.Context, root string, args []string) error {
	out := &tailBuffer{max: 4096}
	cmd := exec.CommandContext(ctx, "chroot", append([]string{root, "apt-get"}, args...)...)
	cmd.Env = chrootEnv()
	cmd.Stdout, cmd.Stderr = out, out
	ownGroup(cmd)
	cmd.WaitDelay = 30 * time.Second
	err := cmd.Run()
	if err == nil {
		return nil
	}
	if cmd.Process != nil {
		// ESRCH, the usual answer, means nothing was left.
		killGroup(cmd)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("apt-get install stopped: %w", context.Cause(ctx))
	}
	return fmt.Errorf("apt-get install in the %s root: %w\n%s", debianSuite, err, out)
}

// chrootEnv is apt's environment in the chroot: non-interactive, plus the
// host's proxy settings, which debootstrap used too.
func chrootEnv() []string {
	env := []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LC_ALL=C", "DEBIAN_FRONTEND=noninteractive"}
	for _, k := range []string{"http_proxy", "https_proxy", "no_proxy"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// trimRootfs drops the apt caches and the host's identity files that
// debootstrap copies in (Docker provides its own at run time).
func trimRootfs(root string) error {
	for _, pattern := range []string{"var/cache/apt/archives/*.deb", "var/cache/apt/*.bin", "var/lib/apt/lists/*"} {
		matches, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			return fmt.Errorf("trim rootfs: %w", err)
		}
		for _, m := range matches {
			if err := os.RemoveAll(m); err != nil {
				return fmt.Errorf("trim rootfs: %w", err)
			}
		}
	}
	for _, name := range []string{"etc/hostname", "etc/resolv.conf"} {
		err := os.WriteFile(filepath.Join(root, name), nil, 0o644)
		if err != nil {
			return fmt.Errorf("trim rootfs: %w", err)
		}
	}
	return nil
}

// importTree streams dir as a tar straight into an image import.
func (b *Builder) importTree(ctx context.Context, dir, tag string) error {
	b.progressf("pybox: importing the root filesystem as %s...", tag)
	pr, pw := io.Pipe()
	counted := &countWriter{w: pw}
	done := make(chan error, 1)
	go func() {
		err := writeRootfs(counted, dir)
		pw.CloseWithError(err) // nil means EOF
		done <- err
	}()
	changes := []string{"ENV PATH=" + envPath, `CMD ["/bin/bash"]`}
	err := b.Engine.ImportImage(ctx, pr, tag, changes)
	pr.CloseWithError(errImportEnded) // unblocks the writer if the daemon stopped reading
	werr := <-done
	if werr != nil && !errors.Is(werr, errImportEnded) {
		return fmt.Errorf("root filesystem tar: %w", werr)
	}
	if err != nil {
		return err
	}
	b.progressf("pybox: imported %s (%d MB)", tag, counted.n>>20)
	return nil
}

// removeTree removes a debootstrap directory, first unmounting whatever
// debootstrap left mounted inside (a /proc after a kill), and refuses to
// remove anything while a mount remains: RemoveAll would cross into it.
func removeTree(dir string) error {
	mounts, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	for i := len(mounts) - 1; i >= 0; i-- {
		// Errors show up in the re-check below.
		_ = exec.Command("umount", "-l", mounts[i]).Run()
	}
	if mounts, err = mountsUnder(dir); err != nil {
		return err
	}
	if len(mounts) > 0 {
		return fmt.Errorf("remove %s: still mounted: %s", dir, strings.Join(mounts, ", "))
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove debootstrap directory: %w", err)
	}
	return nil
}

// mountsUnder lists the mount points at or below dir, parents first.
func mountsUnder(dir string) ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	dir = filepath.Clean(dir)
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMount(f[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out, nil
}

// unescapeMount decodes the octal escapes (\040 for a space) of mountinfo.
func unescapeMount(s string) string {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1:i+4]) {
			sb.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		sb.WriteByte(s[i])
	}
	return sb.String()
}

func isOctal(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '7' {
			return false
		}
	}
	return true
}
