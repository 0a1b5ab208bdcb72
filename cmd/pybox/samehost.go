package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"

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
func (a *app) checkSameHost(ctx context.Context, dirs ...string) error {
	if !inContainer() {
		return nil
	}
	for _, dir := range dirs {
		if err := a.sameHost(ctx, dir); err != nil {
			return err
		}
	}
	return nil
}

func (a *app) sameHost(ctx context.Context, dir string) error {
	nonce := make([]byte, 16)
	rand.Read(nonce)
	name := ".pybox-hostcheck-" + hex.EncodeToString(nonce[:8])
	want := hex.EncodeToString(nonce)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	probe := filepath.Join(dir, name)
	if err := os.WriteFile(probe, []byte(want), 0o644); err != nil {
		return fmt.Errorf("check %s: %w", dir, err)
	}
	defer os.Remove(probe)
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	exit, err := a.engine.Run(ctx, engine.Spec{
		Name: a.sandbox.Owner().ContainerName("probe"),
		// As root (no capabilities): the folder may be pybox's own, 0700.
		// It runs cat on pybox's file, nothing else.
		Config: &container.Config{Image: a.image, Cmd: []string{"cat", "/check/" + name}, User: "0:0", NetworkDisabled: true,
			Labels: a.sandbox.Owner().Labels("probe")},
		Host: &container.HostConfig{NetworkMode: "none", ReadonlyRootfs: true, CapDrop: []string{"ALL"}, SecurityOpt: []string{"no-new-privileges"},
			LogConfig: container.LogConfig{Type: "none"}, Mounts: []mount.Mount{{Type: mount.TypeBind, Source: dir, Target: "/check", ReadOnly: true}}},
		Stdout: &out, Timeout: 30 * time.Second,
	})
	if err == nil && exit.Code == 0 && out.String() == want {
		return nil
	}
	why := fmt.Sprintf("a container of the Docker host did not find it there (exit %d)", exit.Code)
	if err != nil {
		why = err.Error()
		if errors.Is(err, engine.ErrUnreachable) {
			return err
		}
	}
	return fmt.Errorf("pybox runs in a container, and the folder %s it sees is not the folder %s on the Docker host (%s): "+
		"sandboxes get folders by host path, so files would not reach them. Mount the host folder at the same path in pybox's container "+
		"(docker run -v /srv/pybox:/srv/pybox -e CODE_STORAGE_DIR=/srv/pybox/code -e PYBOX_STATE_DIR=/srv/pybox/state ...), "+
		"or a named volume at the path its data has on the host", dir, dir, why)
}
