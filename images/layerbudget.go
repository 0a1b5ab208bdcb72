package images

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/docker/go-units"

	"github.com/pybox-dev/pybox/internal/engine"
)

// ErrLayerBudget: an install would take its owner's package layers past
// their disk budget (Installer.LayerBytes); nothing was committed.
var ErrLayerBudget = errors.New("package layer budget exceeded")

// DefaultLayerBytes is an owner's layer budget when Installer.LayerBytes is 0.
const DefaultLayerBytes = 10 << 30

// LabelLayerBytes records on a package layer what its install wrote (the
// layer's own size, without the images under it), for the budget.
const LabelLayerBytes = "pybox.layer-bytes"

// layerBudget is the installer's budget in bytes.
func (in *Installer) layerBudget() int64 {
	if in.LayerBytes > 0 {
		return in.LayerBytes
	}
	return DefaultLayerBytes
}

// layerUsage adds up the own sizes of the package layers of this
// installer's owner: the size each records, or for a layer from before
// the record its size less its parent's (all of it when the parent is
// unknown: what cannot be measured counts in full).
func (in *Installer) layerUsage(ctx context.Context) (int64, error) {
	list, err := in.Engine.ListImages(ctx, "pybox.managed", "image")
	if err != nil {
		return 0, err
	}
	sizes := make(map[string]int64, len(list))
	for _, img := range list {
		sizes[img.ID] = img.Size
	}
	var used int64
	for _, img := range list {
		if !ownLayer(img, in.Tenant) {
			continue
		}
		if n, err := strconv.ParseInt(img.Labels[LabelLayerBytes], 10, 64); err == nil && n >= 0 {
			used += n
			continue
		}
		used += img.Size - in.parentSize(ctx, img, sizes)
	}
	return used, nil
}

// parentSize is the size of img's parent image, 0 when unknown.
func (in *Installer) parentSize(ctx context.Context, img engine.Image, known map[string]int64) int64 {
	if n, ok := known[img.Parent]; ok || img.Parent == "" {
		return n
	}
	p, found, err := in.Engine.InspectImage(ctx, img.Parent)
	if err != nil || !found || p.Size > img.Size {
		return 0
	}
	return p.Size
}

// checkLayerBudget fails with ErrLayerBudget when the owner's layers and
// adding more bytes would pass the budget (adding 0: when they are at it).
func (in *Installer) checkLayerBudget(ctx context.Context, adding int64) error {
	used, err := in.layerUsage(ctx)
	if err != nil {
		return fmt.Errorf("measure the package layers: %w", err)
	}
	budget := in.layerBudget()
	if used+adding > budget || (adding == 0 && used >= budget) {
		return fmt.Errorf("%w: the package layers of this owner hold %s and this install adds %s, past their budget of %s (PYBOX_LAYER_QUOTA); reuse installed packages, or ask the operator to remove unused layers (pybox gc) or raise the budget",
			ErrLayerBudget, units.BytesSize(float64(used)), units.BytesSize(float64(adding)), units.BytesSize(float64(budget)))
	}
	return nil
}
