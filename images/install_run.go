package images

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/pybox-dev/pybox/internal/engine"
)

// InstallResult is what an install did.
type InstallResult struct {
	Env       Environment   // the environment after the install
	Cached    bool          // an existing layer (or the environment itself) had it: no container ran
	Installer string        // uv or pip ("" when nothing was needed)
	Output    string        // the installer's output (its tail), empty when cached
	Duration  time.Duration // wall-clock time of the whole call
}

// Install adds the canonical specs to env: it reuses the layer with the
// same content key when one exists, and otherwise runs the installer in a
// fresh container from env's image and commits it. env itself is never
// changed; on failure no image or container is left.
func (in *Installer) Install(ctx context.Context, env Environment, specs []string) (InstallResult, error) {
	start := time.Now()
	missing := slices.DeleteFunc(slices.Clone(specs), func(s string) bool { return slices.Contains(env.Requirements, s) })
	if len(missing) == 0 {
		return InstallResult{Env: env, Cached: true, Duration: time.Since(start)}, nil
	}
	if in.Refuse != nil {
		return InstallResult{}, in.Refuse
	}
	l, err := in.plan(ctx, env, missing)
	if err != nil {
		return InstallResult{}, err
	}
	img, cached, out, err := in.layerImage(ctx, env, l)
	if err != nil {
		return InstallResult{Output: out}, err
	}
	next := env
	next.Image, next.ImageID, next.Requirements, next.Depth = l.tag(), img.ID, l.all, l.depth
	return InstallResult{Env: next, Cached: cached, Installer: l.installer, Output: out, Duration: time.Since(start)}, nil
}

// layerImage returns the layer's image, building it once however many
// callers ask at the same time. The build runs detached from any one
// caller, so a caller giving up does not fail the others; Close ends it.
func (in *Installer) layerImage(ctx context.Context, env Environment, l layer) (engine.Image, bool, string, error) {
	if img, found, err := inspectRef(ctx, in.Engine, l.tag()); err != nil {
		return img, false, "", err
	} else if found && ownLayer(img, in.Tenant) {
		return img, true, "", nil
	} else if found {
		return engine.Image{}, false, "", fmt.Errorf("layer %s is not one of this tenant's installs", l.tag())
	}
	if err := in.checkLayerBudget(ctx, 0); err != nil { // at the budget already: no install starts
		return engine.Image{}, false, "", err
	}
	ch := in.group.DoChan(l.key, func() (any, error) {
		in.mu.Lock()
		if in.closed {
			in.mu.Unlock()
			return nil, errInstallerClosed
		}
		in.builds.Add(1)
		in.mu.Unlock()
		defer in.builds.Done()
		return in.build(in.lifetime(), env, l)
	})
	select {
	case r := <-ch:
		b, _ := r.Val.(built) // the zero value on error
		return b.img, false, b.output, r.Err
	case <-ctx.Done():
		return engine.Image{}, false, "", context.Cause(ctx)
	}
}

// built is the value a build flight shares.
type built struct {
	img    engine.Image
	output string
}

// build runs the install container and commits it when the installer
// succeeded and changed nothing outside the package directories.
func (in *Installer) build(ctx context.Context, env Environment, l layer) (built, error) {
	st, err := in.stage()
	if err != nil {
		return built{}, err
	}
	defer st.remove()
	var fetched string
	if in.online() {
		if st.downloads, err = st.subdir("downloads"); err != nil {
			return built{}, err
		}
		if fetched, err = in.download(ctx, env, l, st.wheelhouse, st.downloads); err != nil {
			return built{output: fetched}, err
		}
	}
	out := &tailBuffer{max: 16 << 10}
	out.Write([]byte(fetched)) // the download's output first
	head := &headWriter{max: 16 << 10, rest: out}
	spec := in.installSpec(env, l, st, head, out)
	spec.OnExit = func(ctx context.Context, id string, exit engine.Exit) error {
		if exit.Code != 0 || exit.TimedOut || exit.OOMKilled {
			return nil
		}
		return in.commit(ctx, id, env, l, head.first())
	}
	in.log().Info("installing packages", "specs", l.specs, "installer", l.installer, "parent", l.parentRef, "key", l.key[:12])
	exit, err := in.Engine.Run(ctx, spec)
	b := built{output: out.String()}
	if err := in.failure(exit, err, head.first(), b.output); err != nil {
		return b, err
	}
	img, found, err := inspectRef(ctx, in.Engine, l.tag())
	if err == nil && !found {
		err = errors.New("committed layer vanished")
	}
	b.img = img
	return b, err
}

// commit checks the exited install container's changes against the
// package directories it reported and, when all are allowed, commits it
// as the layer.
func (in *Installer) commit(ctx context.Context, id string, env Environment, l layer, report string) error {
	dirs, err := parseDirs(report)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInstallFailed, err)
	}
	changes, err := in.Engine.Changes(ctx, id)
	if err != nil {
		return err
	}
	if refused := dirs.refusedChanges(changes); len(refused) > 0 {
		in.log().Warn("install refused: changes outside the package directories", "specs", l.specs, "paths", refused)
		return dirs.outsideError(refused)
	}
	// The budget is checked on what the install wrote, before it becomes
	// a layer; one check and commit at a time, so two installs cannot
	// both fit in what is left for one.
	in.budgetMu.Lock()
	defer in.budgetMu.Unlock()
	size, err := in.Engine.ContainerSize(ctx, id)
	if err != nil {
		return err
	}
	if err := in.checkLayerBudget(ctx, size); err != nil {
		in.log().Warn("install refused: package layer budget", "specs", l.specs, "bytes", size, "err", err)
		return err
	}
	lines := append(commitChanges(env, l, in.Tenant, time.Now()), fmt.Sprintf("LABEL %s=%d", LabelLayerBytes, size))
	_, err = in.Engine.Commit(ctx, id, l.tag(), "pybox install "+strings.Join(l.specs, " "), lines)
	return err
}

// failure turns how the install container ended into the install's error
// (nil when it succeeded and was committed).
func (in *Installer) failure(exit engine.Exit, err error, report, output string) error {
	if dirs, perr := parseDirs(report); perr == nil && len(dirs.Unwritable) > 0 {
		return dirs.unwritableError()
	}
	switch {
	case errors.Is(err, engine.ErrUnreachable):
		return err
	case err != nil && exit == (engine.Exit{}):
		return fmt.Errorf("%w: the install container could not run (%v)", ErrInstallFailed, err)
	case err != nil:
		return err
	case exit.TimedOut:
		return fmt.Errorf("%w: timed out after %v", ErrInstallFailed, in.timeout())
	case exit.OOMKilled:
		return fmt.Errorf("%w: the installer ran out of memory", ErrInstallFailed)
	case exit.Code != 0:
		return fmt.Errorf("%w (exit status %d)%s", ErrInstallFailed, exit.Code, in.sdistHint(output))
	}
	return nil
}

func (in *Installer) log() *slog.Logger {
	if in.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return in.Log
}
