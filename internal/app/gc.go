package app

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pybox-dev/pybox/images"
)

// RemoveLayers removes the package-layer images no saved environment uses
// (every one with all; with dry, only says which), one line each on out.
func (a *App) RemoveLayers(ctx context.Context, all, dry bool, out io.Writer) error {
	keep, err := keptImages(a.Config.StateDir)
	if err != nil {
		return err
	}
	return gcLayers(ctx, a, keep, all, dry, out)
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
func gcLayers(ctx context.Context, a *App, keep []string, all, dry bool, stdout io.Writer) error {
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
			fmt.Fprintf(stdout, "would remove %v (%s)\n", img.Tags, ShortID(img.ID))
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

// ShortID is an image or container id as docker prints it: 12 hex digits.
func ShortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
