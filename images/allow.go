package images

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/distribution/reference"

	"github.com/pybox-dev/pybox/internal/engine"
)

// LabelTenant names the tenant whose install made a package layer; absent
// or empty, the server itself (no tenants). A tenant's environment uses
// only layers with its own name here.
const LabelTenant = "pybox.tenant"

// idLike is what the daemon could take for an image ID or a prefix of one.
var idLike = regexp.MustCompile(`^(sha256:)?[0-9a-f]{1,64}$`)

// fullID is a whole image ID, as pybox records it after resolving a reference.
var fullID = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// Immutable reports whether ref names one image for good: a whole image
// ID (sha256:<64 hex>) or a reference by digest (name@sha256:<64 hex>).
// A tag may move to another image; an ID prefix may come to match another.
func Immutable(ref string) bool {
	if fullID.MatchString(ref) {
		return true
	}
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return false
	}
	_, digested := named.(reference.Canonical)
	return digested
}

// NormalizeRef returns ref's full form (docker.io/library/python:3.12-slim
// for python:3.12-slim; a tag of latest when none is given). An image ID or
// a prefix of one is refused: the daemon resolves those against every image
// it holds.
func NormalizeRef(ref string) (string, error) {
	if idLike.MatchString(ref) || strings.HasPrefix(ref, "sha256:") {
		return "", fmt.Errorf("%q looks like an image ID (or a prefix of one): give a reference such as name:tag or name@sha256:<digest>", ref)
	}
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return "", fmt.Errorf("%q is not an image reference: %w", ref, err)
	}
	return reference.TagNameOnly(named).String(), nil
}

// inspectRef returns the image ref names, never one the daemon found as an
// ID prefix: ref must not look like an ID (NormalizeRef), and the image
// found must carry ref among its tags or digests (Podman names local
// images localhost/NAME). A whole image ID (sha256:<64 hex>) is inspected
// as such.
func inspectRef(ctx context.Context, eng *engine.Client, ref string) (engine.Image, bool, error) {
	if fullID.MatchString(ref) {
		img, found, err := eng.InspectImage(ctx, ref)
		return img, found && img.ID == ref, err
	}
	full, err := NormalizeRef(ref)
	if err != nil {
		return engine.Image{}, false, fmt.Errorf("%w: image %w", errBadEnv, err)
	}
	img, found, err := eng.InspectImage(ctx, ref)
	if err != nil || !found {
		return engine.Image{}, false, err
	}
	for _, name := range append(slices.Clone(img.Tags), img.Digests...) {
		for _, n := range []string{name, strings.TrimPrefix(name, "localhost/")} {
			if norm, err := NormalizeRef(n); err == nil && norm == full {
				return img, true, nil
			}
		}
	}
	return engine.Image{}, false, nil
}

// allowlist is the images an environment may start from: the operator's
// list, pybox's own runtime images and the configured starting image. Its
// entries are full references.
type allowlist map[string]bool

// newAllowlist normalizes refs; a malformed entry is an error.
func newAllowlist(refs []string) (allowlist, error) {
	a := allowlist{}
	for _, v := range []string{VariantBase, VariantDatascience} {
		a.add(Tag(v))
	}
	var errs []error
	for _, r := range refs {
		full, err := NormalizeRef(r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		a[full] = true
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("allowed images (PYBOX_ALLOWED_IMAGES): %w", err)
	}
	return a, nil
}

func (a allowlist) add(ref string) {
	if full, err := NormalizeRef(ref); err == nil {
		a[full] = true
	}
}

// allows reports whether ref, in its full form, is on the list.
func (a allowlist) allows(ref string) bool {
	full, err := NormalizeRef(ref)
	return err == nil && a[full]
}

// ownLayer reports whether img is a package layer pybox made for tenant.
func ownLayer(img engine.Image, tenant string) bool {
	return img.Labels[LabelKey] != "" && img.Labels[LabelTenant] == tenant
}

// notAllowedError is the refusal of an image an environment may not use.
func notAllowedError(ref string) error {
	return fmt.Errorf("%w: image %q is not allowed: environments start from pybox's runtime images, the configured "+
		"image, or an image the operator lists in PYBOX_ALLOWED_IMAGES (full references, never image IDs), or from "+
		"package layers of your own installs", errBadEnv, ref)
}
