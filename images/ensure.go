package images

import (
	"context"
	"errors"
	"fmt"

	"github.com/pybox-dev/pybox/internal/engine"
)

// Ensure returns the runtime image of variant when it exists and its digest
// label is current; otherwise it builds it, online first, then offline when
// the online build fails. Concurrent calls for one variant share one build,
// which runs on the first caller's ctx.
func (b *Builder) Ensure(ctx context.Context, variant string) (engine.Image, error) {
	v, err := ParseVariant(variant)
	if err != nil {
		return engine.Image{}, err
	}
	if b.Engine == nil {
		return engine.Image{}, errors.New("images builder: no engine client")
	}
	res, err, _ := b.group.Do(v, func() (any, error) { return b.ensure(ctx, v) })
	if err != nil {
		return engine.Image{}, err
	}
	return res.(engine.Image), nil
}

// ensure checks the image and builds it when needed, holding the
// cross-process build lock so an image another process just built is found.
func (b *Builder) ensure(ctx context.Context, variant string) (engine.Image, error) {
	if img, ok, err := b.current(ctx, variant, false); err != nil || ok {
		return img, err
	}
	unlock, err := lockBuild(ctx, variant)
	if err != nil {
		return engine.Image{}, err
	}
	defer unlock()
	img, ok, err := b.current(ctx, variant, true)
	if err != nil || ok {
		return img, err
	}
	img, onlineErr := b.build(ctx, variant, false)
	if onlineErr == nil {
		return img, nil
	}
	if ctx.Err() != nil {
		return engine.Image{}, onlineErr
	}
	b.log().Info("online image build failed; building offline", "variant", variant, "err", onlineErr)
	b.progressf("pybox: online build of %s failed; building offline from Debian instead", b.tag(variant))
	img, err = b.build(ctx, variant, true)
	if err != nil {
		return engine.Image{}, fmt.Errorf("build image %s: online: %v; offline: %w", b.tag(variant), onlineErr, err)
	}
	return img, nil
}

// current returns the runtime image of variant and whether it is present
// and built from the current inputs (online or offline). When report is
// set, a stale image is logged and announced.
func (b *Builder) current(ctx context.Context, variant string, report bool) (engine.Image, bool, error) {
	img, found, err := b.Engine.InspectImage(ctx, b.tag(variant))
	if err != nil || !found {
		return engine.Image{}, false, err
	}
	switch img.Labels[LabelDigest] {
	case digest(variant, modeOnline), digest(variant, modeOffline):
		return img, true, nil
	}
	if !report {
		return img, false, nil
	}
	b.log().Info("runtime image is stale", "image", b.tag(variant), "image_id", shortID(img.ID))
	b.progressf("pybox: %s is out of date; rebuilding it", b.tag(variant))
	return img, false, nil
}
