package images

import (
	"context"
	"fmt"

	"github.com/pybox-dev/pybox/internal/engine"
)

// The registry images of the online base.
const (
	onlinePython  = "python:3.12-slim-bookworm"
	onlineUV      = "ghcr.io/astral-sh/uv:0.9"
	onlineBaseTag = rootfsRepo + ":online"
)

// onlineDockerfile makes the online base: official Python plus uv.
func onlineDockerfile() string {
	return "FROM " + onlinePython + "\n" +
		"COPY --from=" + onlineUV + " /uv /uvx /usr/local/bin/\n"
}

// onlinePackages are installed from PyPI into the venv of variant.
func onlinePackages(variant string) string {
	if variant == VariantDatascience {
		return "numpy pandas matplotlib"
	}
	return ""
}

// buildOnline builds the runtime image on the official Python image with
// uv. Without a registry it fails within the first pull.
func (b *Builder) buildOnline(ctx context.Context, variant string) (engine.Image, error) {
	for _, ref := range []string{onlinePython, onlineUV} {
		if err := b.pull(ctx, ref); err != nil {
			return engine.Image{}, err
		}
	}
	old, hadOld, err := b.Engine.InspectImage(ctx, onlineBaseTag)
	if err != nil {
		return engine.Image{}, err
	}
	if err := b.buildOnlineBase(ctx); err != nil {
		return engine.Image{}, err
	}
	img, err := b.buildRuntime(ctx, runtimeBuild{
		variant: variant, mode: modeOnline, base: onlineBaseTag, installer: "uv",
		args: map[string]string{"SYSTEM_SITE_PACKAGES": "0", "PACKAGES": onlinePackages(variant)},
	})
	if err == nil && hadOld {
		b.removeSuperseded(ctx, old.ID, onlineBaseTag)
	}
	return img, err
}

// pull refreshes ref from its registry. A local copy is used when the
// registry cannot be reached; with no local copy the error says what to do.
func (b *Builder) pull(ctx context.Context, ref string) error {
	b.progressf("pybox: pulling %s...", ref)
	err := b.Engine.PullImage(ctx, ref, b.progress())
	if err == nil {
		return nil
	}
	_, found, ierr := b.Engine.InspectImage(ctx, ref)
	if ierr != nil || !found {
		return fmt.Errorf("online image build needs %s from its registry "+
			"(no registry here? build offline: pybox image build --offline): %w", ref, err)
	}
	b.log().Warn("pull failed; using the local image", "image", ref, "err", err)
	b.progressf("pybox: pull of %s failed; using the local copy", ref)
	return nil
}

// buildOnlineBase builds onlineDockerfile as onlineBaseTag.
func (b *Builder) buildOnlineBase(ctx context.Context) error {
	buildCtx, err := buildContext(contextFile{"Dockerfile", []byte(onlineDockerfile())})
	if err != nil {
		return err
	}
	b.progressf("pybox: building %s (%s with uv)", onlineBaseTag, onlinePython)
	return b.Engine.BuildImage(ctx, buildCtx, "Dockerfile", onlineBaseTag, nil, nil, b.progress())
}
