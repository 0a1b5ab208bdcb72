package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"

	"github.com/pybox-dev/pybox/images"
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
	keep, err := keptImages(c.StateDir)
	if err != nil {
		return err
	}
	return gcLayers(ctx, a, keep, *all, *dry, stdout)
}

// keptImages lists the images the saved environments use: the server's
// and, over HTTP with tokens, every tenant's (stateDir/tenants/NAME).
func keptImages(stateDir string) ([]string, error) {
	tenants, err := filepath.Glob(filepath.Join(stateDir, "tenants", "*", "environment.json"))
	if err != nil {
		return nil, err
	}
	var keep []string
	for _, p := range append([]string{filepath.Join(stateDir, "environment.json")}, tenants...) {
		refs, err := images.StateImages(p)
		if err != nil {
			return nil, err
		}
		keep = append(keep, refs...)
	}
	return keep, nil
}

// gcLayers removes package-layer images not in keep (all of them with all).
func gcLayers(ctx context.Context, a *app.App, keep []string, all, dry bool, stdout io.Writer) error {
	layers, err := a.Engine.ListImages(ctx, "pybox.managed", "image")
	if err != nil {
		return err
	}
	removed, kept := 0, 0
	for _, img := range layers {
		if !all && (slices.ContainsFunc(img.Tags, func(t string) bool { return slices.Contains(keep, t) }) || slices.Contains(keep, img.ID)) {
			kept++
			continue
		}
		if dry {
			fmt.Fprintf(stdout, "would remove %v (%s)\n", img.Tags, shortID(img.ID))
			removed++
			continue
		}
		if err := a.Engine.RemoveImage(ctx, img.ID); err != nil {
			fmt.Fprintf(stdout, "kept %v: %v\n", img.Tags, err) // in use by a child layer or a container
			kept++
			continue
		}
		removed++
	}
	verb := "removed"
	if dry {
		verb = "to remove"
	}
	fmt.Fprintf(stdout, "package layers: %d %s, %d kept\n", removed, verb, kept)
	return nil
}
