package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/pkg/jsonmessage"
)

// Image is what pybox needs to know about a local image.
type Image struct {
	ID   string
	Tags []string
	// Digests are the image's repository digests (name@sha256:...).
	Digests []string
	Labels  map[string]string
	Env     []string
	User    string
	Cmd     []string
	Layers  int
	Size    int64
	Parent  string // the image it was committed from ("" when unknown)
}

// InspectImage returns the image named ref; found is false when it is absent.
func (c *Client) InspectImage(ctx context.Context, ref string) (img Image, found bool, err error) {
	ii, err := c.cli().ImageInspect(ctx, ref)
	if IsNotFound(err) {
		return Image{}, false, nil
	}
	if err != nil {
		return Image{}, false, fmt.Errorf("inspect image %s: %w", ref, c.unreachable(err, false))
	}
	img = Image{ID: ii.ID, Tags: ii.RepoTags, Digests: ii.RepoDigests, Size: ii.Size, Parent: ii.Parent}
	if ii.Config != nil {
		img.Labels, img.Env, img.User, img.Cmd = ii.Config.Labels, ii.Config.Env, ii.Config.User, ii.Config.Cmd
	}
	img.Layers = len(ii.RootFS.Layers)
	return img, true, nil
}

// BuildImage builds a Dockerfile from a tar build context and tags it,
// writing the builder's progress lines to progress (nil discards).
func (c *Client) BuildImage(ctx context.Context, buildContext io.Reader, dockerfile, tag string,
	args map[string]string, labels map[string]string, progress io.Writer) error {
	ba := map[string]*string{}
	for k, v := range args {
		ba[k] = &v
	}
	resp, err := c.cli().ImageBuild(ctx, buildContext, build.ImageBuildOptions{
		Tags: []string{tag}, Dockerfile: dockerfile, BuildArgs: ba, Labels: labels,
		Remove: true, ForceRemove: true, NetworkMode: "default",
	})
	if err != nil {
		return fmt.Errorf("build image %s: %w", tag, c.unreachable(err, false))
	}
	defer resp.Body.Close()
	return displayStream(resp.Body, progress)
}

// ImportImage creates an image from a root filesystem tarball.
func (c *Client) ImportImage(ctx context.Context, rootfs io.Reader, ref string, changes []string) error {
	rc, err := c.cli().ImageImport(ctx, image.ImportSource{Source: rootfs, SourceName: "-"}, ref,
		image.ImportOptions{Changes: changes, Message: "pybox offline base"})
	if err != nil {
		return fmt.Errorf("import image %s: %w", ref, err)
	}
	defer rc.Close()
	return displayStream(rc, nil)
}

// PullImage pulls ref, writing progress lines to progress.
func (c *Client) PullImage(ctx context.Context, ref string, progress io.Writer) error {
	rc, err := c.cli().ImagePull(ctx, ref, image.PullOptions{})
	if err != nil {
		return fmt.Errorf("pull image %s: %w", ref, err)
	}
	defer rc.Close()
	return displayStream(rc, progress)
}

// TagImage adds the tag dst to the image src.
func (c *Client) TagImage(ctx context.Context, src, dst string) error {
	if err := c.cli().ImageTag(ctx, src, dst); err != nil {
		return fmt.Errorf("tag image %s as %s: %w", src, dst, err)
	}
	return nil
}

// RemoveImage removes ref; an absent image counts as removed.
func (c *Client) RemoveImage(ctx context.Context, ref string) error {
	_, err := c.cli().ImageRemove(ctx, ref, image.RemoveOptions{PruneChildren: true})
	if err != nil && !IsNotFound(err) {
		return fmt.Errorf("remove image %s: %w", ref, err)
	}
	return nil
}

// ListImages returns the images carrying the label key=value.
func (c *Client) ListImages(ctx context.Context, key, value string) ([]Image, error) {
	list, err := c.cli().ImageList(ctx, image.ListOptions{Filters: labelFilter(map[string]string{key: value})})
	if err != nil {
		return nil, fmt.Errorf("list images: %w", c.unreachable(err, false))
	}
	out := make([]Image, 0, len(list))
	for _, s := range list {
		out = append(out, Image{ID: s.ID, Tags: s.RepoTags, Labels: s.Labels, Size: s.Size, Parent: s.ParentID})
	}
	return out, nil
}

// Commit turns the stopped container id into the image ref with the given
// Dockerfile changes (ENV, LABEL, CMD...) and returns the new image ID.
func (c *Client) Commit(ctx context.Context, id, ref, comment string, changes []string) (string, error) {
	resp, err := c.cli().ContainerCommit(ctx, id, container.CommitOptions{
		Reference: ref, Comment: comment, Author: "pybox", Changes: changes,
	})
	if err != nil {
		return "", fmt.Errorf("commit container %s: %w", short(id), err)
	}
	return resp.ID, nil
}

// ContainerSize is what the container id wrote over its image (its
// writable layer's size: what a commit of it adds).
func (c *Client) ContainerSize(ctx context.Context, id string) (int64, error) {
	ins, _, err := c.cli().ContainerInspectWithRaw(ctx, id, true)
	if err != nil {
		return 0, fmt.Errorf("inspect container %s: %w", short(id), c.unreachable(err, false))
	}
	if ins.SizeRw == nil {
		return 0, fmt.Errorf("inspect container %s: the daemon did not report its size", short(id))
	}
	return *ins.SizeRw, nil
}

// displayStream reads a JSON message stream (build, pull, import), writes
// its human-readable lines to w and returns the first error it carries.
func displayStream(r io.Reader, w io.Writer) error {
	dec := json.NewDecoder(r)
	for {
		var m jsonmessage.JSONMessage
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("read daemon stream: %w", err)
		}
		if m.Error != nil {
			return errors.New(strings.TrimSpace(m.Error.Message))
		}
		if w == nil {
			continue
		}
		line := strings.TrimRight(m.Stream, "\n")
		if line == "" && m.Status != "" {
			line = strings.TrimSpace(m.Status + " " + m.ID + " " + m.Progress.String())
		}
		if line != "" {
			fmt.Fprintln(w, line)
		}
	}
}
