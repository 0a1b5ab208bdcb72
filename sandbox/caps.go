package sandbox

import "context"

// Capabilities are what a backend can do besides running containers.
// pybox asks them instead of which backend it is.
type Capabilities struct {
	// HostFolders: its containers can bind-mount folders of pybox's host
	// (code storage, session workspaces, run output folders, an owner's
	// quota filesystem). Without, stateless runs get a scratch workspace
	// of their own and no host folder is checked or given away.
	HostFolders bool
	// LocalImages: its containers run images of pybox's own engine, so
	// pybox builds the runtime image there, commits installs as image
	// layers, and a policy's OCI runtime is one of the engine's. Without,
	// the backend pulls a prepared image (PYBOX_IMAGE) and refuses installs.
	LocalImages bool
	// Egress: its containers can reach pybox's egress proxy, so an
	// allowlist can be honoured (see ErrNoEgress).
	Egress bool
}

// capable is implemented by backends that say what they can do.
type capable interface{ Capabilities() Capabilities }

// CapabilitiesOf is what b can do; a backend that does not say can do
// nothing besides running containers.
func CapabilitiesOf(b Backend) Capabilities {
	if c, ok := b.(capable); ok {
		return c.Capabilities()
	}
	return Capabilities{}
}

// Capabilities: Docker and Podman do everything pybox asks of a backend.
func (docker) Capabilities() Capabilities {
	return Capabilities{HostFolders: true, LocalImages: true, Egress: true}
}

// Capabilities: pods mount no host folder and run images the cluster
// pulls; they reach the egress proxy over the runner's attach channel
// (a unix socket on pybox's host is out of their reach).
func (kubernetes) Capabilities() Capabilities { return Capabilities{Egress: true} }

// healthReporter is implemented by backends with a health check of their
// own.
type healthReporter interface {
	health(ctx context.Context, image string) (map[string]string, bool)
}

// Health says whether b can run image's containers now, with a report
// naming the part that failed (/healthz's body). A backend without a
// check of its own is asked to list pybox's containers.
func Health(ctx context.Context, b Backend, image string) (report map[string]string, ok bool) {
	if h, ok := b.(healthReporter); ok {
		return h.health(ctx, image)
	}
	return listHealth(ctx, b, "backend", image)
}

// listHealth: the backend answers for pybox's containers (name is its
// part in the report).
func listHealth(ctx context.Context, b Backend, name, image string) (map[string]string, bool) {
	out := map[string]string{name: "ok", "image": image}
	if _, err := b.List(ctx, map[string]string{LabelManaged: "true"}); err != nil {
		out[name] = err.Error()
		return out, false
	}
	return out, true
}

// health: the daemon answers and has the runtime image.
func (d docker) health(ctx context.Context, image string) (map[string]string, bool) {
	out := map[string]string{"docker": "ok", "image": image}
	if _, err := d.Ping(ctx); err != nil {
		out["docker"] = err.Error()
		return out, false
	}
	if _, found, err := d.InspectImage(ctx, image); err != nil || !found {
		out["image_status"] = "missing (it is built on first use, or run `pybox image build`)"
		return out, false
	}
	out["image_status"] = "present"
	return out, true
}

// health: the API server answers for pybox's pods (the cluster pulls the
// image).
func (k kubernetes) health(ctx context.Context, image string) (map[string]string, bool) {
	return listHealth(ctx, k, "kubernetes", image)
}
