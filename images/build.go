package images

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"strings"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/singleflight"

	"github.com/pybox-dev/pybox"
	"github.com/pybox-dev/pybox/internal/contract"
	"github.com/pybox-dev/pybox/internal/engine"
)

// The image layout every runtime image has, whatever its base.
const (
	VenvPython  = contract.VenvPython  // the venv's interpreter
	SandboxUser = contract.SandboxUser // uid:gid of the non-root user pybox
	InstallUser = contract.InstallUser // uid:gid installs run as; owns only the venv's package dirs
	Workdir     = contract.Workspace   // working directory, owned by SandboxUser
)

// Variants of the runtime image.
const (
	VariantBase        = "base"        // Python and pip/uv only
	VariantDatascience = "datascience" // plus numpy, pandas and matplotlib
)

// Labels set on every runtime image, besides the OCI annotations.
const (
	LabelDigest    = "pybox.runtime.digest" // hash of the build inputs
	LabelVariant   = "pybox.variant"        // base or datascience
	LabelInstaller = "pybox.installer"      // uv (online) or pip (offline)
	LabelMode      = "pybox.build"          // online or offline
)

const (
	modeOnline  = "online"
	modeOffline = "offline"
	runtimeRepo = "pybox-runtime"
)

// Builder builds and finds runtime images. Zero fields mean the defaults.
type Builder struct {
	Engine   *engine.Client
	Log      *slog.Logger // nil = discard
	Progress io.Writer    // nil = discard; one line per step and daemon build output
	Mirror   string       // Debian mirror for offline builds; "" = http://deb.debian.org/debian
	TempDir  string       // where debootstrap writes; "" = os.TempDir()
	// Repo is the repository of the runtime images it finds and builds,
	// REPO:VARIANT, and of their Debian bases, REPO-rootfs:SUITE-VARIANT;
	// "" = pybox-runtime (and pybox-rootfs). Tests that build use their own.
	Repo string

	group singleflight.Group // one Ensure build per variant at a time
}

// BuildOptions selects what Build builds.
type BuildOptions struct {
	Variant string // "" = base
	Offline bool   // build from a debootstrap of Debian instead of registry images
}

// Tag returns the tag of the runtime image of variant ("" = base).
func Tag(variant string) string {
	if variant == "" {
		variant = VariantBase
	}
	return runtimeRepo + ":" + variant
}

// tag is the tag of the runtime image of variant this builder finds and builds.
func (b *Builder) tag(variant string) string {
	if b.Repo == "" {
		return Tag(variant)
	}
	if variant == "" {
		variant = VariantBase
	}
	return b.Repo + ":" + variant
}

// ParseVariant validates a variant name; "" means base.
func ParseVariant(s string) (string, error) {
	switch s {
	case "", VariantBase:
		return VariantBase, nil
	case VariantDatascience:
		return VariantDatascience, nil
	}
	return "", fmt.Errorf("unknown image variant %q: want %q or %q", s, VariantBase, VariantDatascience)
}

// Build builds the runtime image for opt.Variant, always, and returns it.
// It waits for a build of the same variant in another pybox process.
func (b *Builder) Build(ctx context.Context, opt BuildOptions) (engine.Image, error) {
	variant, err := ParseVariant(opt.Variant)
	if err != nil {
		return engine.Image{}, err
	}
	if b.Engine == nil {
		return engine.Image{}, errors.New("images builder: no engine client")
	}
	unlock, err := lockBuild(ctx, variant)
	if err != nil {
		return engine.Image{}, err
	}
	defer unlock()
	return b.build(ctx, variant, opt.Offline)
}

// build builds the runtime image; the caller holds the build lock.
func (b *Builder) build(ctx context.Context, variant string, offline bool) (engine.Image, error) {
	if offline {
		return b.buildOffline(ctx, variant)
	}
	return b.buildOnline(ctx, variant)
}

// runtimeBuild is one build of Dockerfile.runtime on a prepared base.
type runtimeBuild struct {
	variant, mode string
	base          string // the base image reference (BASE)
	args          map[string]string
	installer     string // uv or pip
}

// buildRuntime builds Dockerfile.runtime on rb.base, tags it, and removes
// the image the tag pointed to before (best effort).
func (b *Builder) buildRuntime(ctx context.Context, rb runtimeBuild) (engine.Image, error) {
	tag := b.tag(rb.variant)
	baseImg, err := b.inspect(ctx, rb.base)
	if err != nil {
		return engine.Image{}, err
	}
	old, hadOld, err := b.Engine.InspectImage(ctx, tag)
	if err != nil {
		return engine.Image{}, err
	}
	buildCtx, err := buildContext(
		contextFile{"Dockerfile.runtime", pybox.DockerfileRuntime})
	if err != nil {
		return engine.Image{}, err
	}
	args := map[string]string{"BASE": rb.base}
	maps.Copy(args, rb.args)
	labels := runtimeLabels(rb, baseImg.ID, time.Now())
	b.progressf("pybox: building %s from %s", tag, rb.base)
	if err := b.Engine.BuildImage(ctx, buildCtx, "Dockerfile.runtime", tag, args, labels, b.progress()); err != nil {
		return engine.Image{}, err
	}
	img, err := b.inspect(ctx, tag)
	if err != nil {
		return engine.Image{}, err
	}
	if hadOld && old.ID != img.ID {
		b.removeSuperseded(ctx, old.ID, tag)
	}
	b.progressf("pybox: built %s (%s, %d MB)", tag, shortID(img.ID), img.Size>>20)
	return img, nil
}

// inspect returns the image ref, which must exist.
func (b *Builder) inspect(ctx context.Context, ref string) (engine.Image, error) {
	img, found, err := b.Engine.InspectImage(ctx, ref)
	if err == nil && !found {
		err = fmt.Errorf("image %s not found", ref)
	}
	return img, err
}

// runtimeLabels are the image labels of a runtime build.
func runtimeLabels(rb runtimeBuild, baseID string, now time.Time) map[string]string {
	return map[string]string{
		LabelDigest:                       digest(rb.variant, rb.mode),
		LabelVariant:                      rb.variant,
		LabelInstaller:                    rb.installer,
		LabelMode:                         rb.mode,
		ocispec.AnnotationCreated:         now.UTC().Format(time.RFC3339),
		ocispec.AnnotationTitle:           "pybox runtime",
		ocispec.AnnotationVersion:         rb.variant,
		ocispec.AnnotationBaseImageName:   rb.base,
		ocispec.AnnotationBaseImageDigest: baseID,
	}
}

// digest hashes everything a runtime image is built from, so a change to
// the Dockerfile, the runner or the recipe of the base marks old images stale.
func digest(variant, mode string) string {
	h := sha256.New()
	for _, part := range [][]byte{pybox.DockerfileRuntime, []byte(variant), []byte(mode), []byte(recipe(variant, mode))} {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// recipe describes how the base of variant is made in mode.
func recipe(variant, mode string) string {
	if mode == modeOffline {
		return offlineRecipe(variant)
	}
	return onlineDockerfile() + "PACKAGES=" + onlinePackages(variant)
}

type contextFile struct {
	name string
	data []byte
}

// buildContext makes a build context holding files.
func buildContext(files ...contextFile) (io.Reader, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		hdr := &tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("build context: %w", err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("build context: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("build context: %w", err)
	}
	return &buf, nil
}

// removeSuperseded removes an image that a rebuild replaced. Images still in
// use (a container, a cached package layer built on it) are kept.
func (b *Builder) removeSuperseded(ctx context.Context, id, tag string) {
	if err := b.Engine.RemoveImage(ctx, id); err != nil {
		b.log().Info("superseded image kept", "image_id", shortID(id), "tag", tag, "err", err)
		return
	}
	b.log().Info("superseded image removed", "image_id", shortID(id), "tag", tag)
}

func (b *Builder) log() *slog.Logger {
	if b.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return b.Log
}

func (b *Builder) progress() io.Writer {
	if b.Progress == nil {
		return io.Discard
	}
	return b.Progress
}

func (b *Builder) progressf(format string, args ...any) {
	fmt.Fprintf(b.progress(), format+"\n", args...)
}

func shortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
