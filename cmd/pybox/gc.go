package main

import (
	"context"
	"fmt"
	"io"

	"github.com/pybox-dev/pybox/internal/app"
)

const gcSynopsis = `pybox gc [--all] [--dry-run] [flags]

Removes the containers of pybox processes that are certainly gone: those whose
lease file is in this state dir's owners/ folder and no longer locked (a
container with a held lease, a lease elsewhere, a missing lease file or no
lease label is left alone). Then removes the package-layer images no saved
environment uses.`

func gcCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := commandConfig("gc")
	fs := newFlags("gc", gcSynopsis, stderr, c)
	all := fs.Bool("all", false, "remove every package-layer image, even those the saved environments use (containers: same rule as without it)")
	dry := fs.Bool("dry-run", false, "remove no container, and only print the package layers that would be removed")
	if err := parse(fs, c, args); err != nil {
		return err
	}
	a, err := app.New(ctx, &c.Config, stderr)
	if err != nil {
		return err
	}
	defer a.Close()
	if !*dry {
		n, err := a.Sandbox.ReapOrphans(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "removed %d leftover containers\n", n)
	}
	return a.RemoveLayers(ctx, *all, *dry, stdout)
}
