package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"

	"github.com/pybox-dev/pybox/internal/contract"
	"github.com/pybox-dev/pybox/internal/engine"
)

// inContainer reports whether pybox itself runs in a container (Docker's
// or Podman's marker file).
func inContainer() bool {
	for _, f := range []string{"/.dockerenv", "/run/.containerenv"} {
		if _, err := os.Stat(f); err == nil {
			return true
		}
	}
	return false
}

// checkSameHost makes sure each folder pybox will bind-mount into
// sandboxes is, on the Docker host, the folder pybox sees. Run in a
// container with the host's Docker socket, pybox hands the daemon paths
// that the daemon resolves on its host: a folder that is only a path
// inside pybox's container (or a volume mounted at another path) would be
// an empty host folder to the sandboxes, and files would vanish between
// the file tools and the programs. Outside a container it checks nothing.
func (a *App) checkSameHost(ctx context.Context, dirs ...string) error {
	if !inContainer() || !a.caps.HostFolders { // no folder of this host is mounted
		return nil
	}
	if _, found, err := a.Engine.InspectImage(ctx, a.Image); err == nil && !found {
		// First start: the image is built in the background, and the probe
		// needs it. The next start checks.
		a.Log.Warn("could not check yet that the folders pybox mounts are the Docker host's: the runtime image is not built; the next start checks", "image", a.Image)
		return nil
	}
	err := a.sameHost(ctx, dirs)
	if errors.Is(err, engine.ErrUnreachable) {
		// Nothing runs until Docker answers; runs then say so clearly.
		a.Log.Warn("could not check that the folders pybox mounts are the Docker host's: Docker does not answer", "err", err)
		return nil
	}
	return err
}

// sameHost writes a file with a random content in each folder and reads
// them back through a container of the Docker host with the folders
// mounted read-only, created but never started (engine.ReadFiles: the
// daemon mounts them for the copy as it would for a run); a folder whose
// file it does not find is not the host's.
func (a *App) sameHost(ctx context.Context, dirs []string) error {
	var want, paths []string
	var mounts []mount.Mount
	for i, dir := range dirs {
		nonce := make([]byte, 16)
		rand.Read(nonce)
		name := ".pybox-hostcheck-" + hex.EncodeToString(nonce[:8])
		content := hex.EncodeToString(nonce) + "\n"
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		probe := filepath.Join(dir, name)
		if err := os.WriteFile(probe, []byte(content), 0o644); err != nil {
			return fmt.Errorf("check %s: %w", dir, err)
		}
		defer os.Remove(probe)
		want = append(want, content)
		target := fmt.Sprintf("/check%d", i)
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: dir, Target: target, ReadOnly: true})
		paths = append(paths, target+"/"+name)
	}
	host := contract.Hardened("none")
	host.ReadonlyRootfs, host.Mounts = true, mounts
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	got, err := a.Engine.ReadFiles(ctx, engine.Spec{
		Name: a.Sandbox.Owner().ContainerName("probe"),
		// Never started: the command is only what a container needs to be created.
		Config: &container.Config{Image: a.Image, Cmd: []string{"true"}, User: "0:0", NetworkDisabled: true, Labels: a.Sandbox.Owner().Labels("probe")},
		Host:   host,
	}, paths, 64)
	if errors.Is(err, engine.ErrUnreachable) {
		return err
	}
	bad := ""
	if err == nil {
		for i, dir := range dirs {
			if string(got[i]) != want[i] {
				bad = dir
				break
			}
		}
		if bad == "" {
			return nil
		}
	}
	// Which one: the one whose file did not read back, or the one the
	// daemon names (a source it does not have), or the first.
	why := "a container of the Docker host did not find pybox's file there"
	if err != nil {
		why, bad = "the Docker daemon: "+err.Error(), dirs[0]
		for i, d := range dirs {
			if strings.Contains(err.Error(), paths[i]) {
				why, bad = "a container of the Docker host did not find pybox's file there ("+err.Error()+")", d
				break
			}
			if strings.Contains(err.Error(), d) {
				bad = d
				break
			}
		}
	}
	return fmt.Errorf("pybox runs in a container, and the folder %s it sees is not the folder %s on the Docker host (%s): "+
		"sandboxes get folders by host path, so files would not reach them. Mount the host folder at the same path in pybox's container "+
		"(docker run -v /srv/pybox:/srv/pybox -e CODE_STORAGE_DIR=/srv/pybox/code -e PYBOX_STATE_DIR=/srv/pybox/state ...), "+
		"or a named volume at the path its data has on the host", bad, bad, why)
}
