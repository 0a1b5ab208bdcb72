package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/pybox-dev/pybox/images"
	"github.com/pybox-dev/pybox/internal/engine"
)

func imageCmd(ctx context.Context, args []string, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "build" {
		fmt.Fprintln(stderr, "Usage: pybox image build [--offline] [--variant base|datascience] [--debian-mirror URL]")
		return errUsage
	}
	fs := newFlags("image build", "pybox image build [flags]", stderr, nil)
	offline := fs.Bool("offline", false, "build without any container registry or PyPI: debootstrap Debian bookworm and import it (needs root and debootstrap)")
	variant := fs.String("variant", "base", "image variant: base or datascience (numpy, pandas, matplotlib)")
	mirror := fs.String("debian-mirror", envDefault("PYBOX_DEBIAN_MIRROR", "http://deb.debian.org/debian"), "Debian mirror for --offline [$PYBOX_DEBIAN_MIRROR]")
	if err := parse(fs, nil, args[1:]); err != nil {
		return err
	}
	v, err := images.ParseVariant(*variant)
	if err != nil {
		return err
	}
	eng, err := engine.New(nil)
	if err != nil {
		return err
	}
	defer eng.Close()
	// A daemon that is down is said so, not blamed on a registry.
	if _, err := eng.Ping(ctx); err != nil {
		if errors.Is(err, engine.ErrPermission) {
			return err
		}
		return fmt.Errorf("%w — start the Docker daemon (dockerd, or Docker Desktop), then build again", err)
	}
	b := &images.Builder{Engine: eng, Progress: stderr, Mirror: *mirror}
	img, err := b.Build(ctx, images.BuildOptions{Variant: v, Offline: *offline})
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "pybox: built %s (%s)\n", images.Tag(v), img.ID)
	return nil
}

// envDefault is the environment variable's value, or def when it is unset.
func envDefault(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
