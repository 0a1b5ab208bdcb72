package tools

import (
	"context"
	"errors"
	"fmt"

	"github.com/pybox-dev/pybox/images"
	"github.com/pybox-dev/pybox/sandbox"
)

// Environments is what the tools need of the environment manager
// (implemented by *images.Manager).
type Environments interface {
	Active() images.Environment
	Canonical(specs []string) ([]string, error)
	Install(ctx context.Context, specs []string) (images.InstallResult, error)
	Installed(ctx context.Context, names []string) ([]images.PackageStatus, error)
	Configure(ctx context.Context, want images.Environment) (images.Environment, error)
}

// EnvironmentView describes an environment to the model.
type EnvironmentView struct {
	Type         string      `json:"type" jsonschema:"venv-uv, venv, conda or image"`
	Variant      string      `json:"variant,omitempty" jsonschema:"runtime image variant (base or datascience)"`
	BaseImage    string      `json:"base_image" jsonschema:"image the environment starts from"`
	Image        string      `json:"image" jsonschema:"image programs run in now (the base plus package layers)"`
	ImageID      string      `json:"image_id" jsonschema:"ID of that image"`
	Python       []string    `json:"python" jsonschema:"command that starts Python"`
	VenvPath     string      `json:"venv_path,omitempty" jsonschema:"venv inside the image"`
	CondaName    string      `json:"conda_name,omitempty" jsonschema:"conda environment name"`
	PythonPath   string      `json:"python_path,omitempty" jsonschema:"interpreter of an image environment"`
	Requirements []string    `json:"requirements" jsonschema:"packages installed so far (canonical specs)"`
	Layers       int         `json:"layers" jsonschema:"package layers on top of the base image"`
	Index        IndexView   `json:"index" jsonschema:"where packages come from"`
	Limits       *LimitsView `json:"limits,omitempty" jsonschema:"limits every run gets"`
}

// IndexView is the package index configuration.
type IndexView struct {
	IndexURL      string `json:"index_url,omitempty"`
	ExtraIndexURL string `json:"extra_index_url,omitempty"`
	Wheelhouse    string `json:"wheelhouse,omitempty"`
	Network       string `json:"install_network" jsonschema:"network of the download step that fetches from an index; installs themselves run with none"`
	AllowSdist    bool   `json:"allow_sdist" jsonschema:"whether installs may build source distributions; false: wheels only"`
}

// LimitsView is the limits in force.
type LimitsView struct {
	TimeoutS     float64 `json:"timeout_s"`
	MaxTimeoutS  float64 `json:"max_timeout_s"`
	MemoryBytes  int64   `json:"memory_bytes"`
	CPUs         float64 `json:"cpus"`
	Pids         int64   `json:"pids"`
	OutputBytes  int     `json:"output_bytes"`
	MaxCodeBytes int     `json:"max_code_bytes"`
}

func (h *handlers) view(env images.Environment) EnvironmentView {
	idx := h.cfg.Index
	return EnvironmentView{
		Type: env.Type, Variant: env.Variant, BaseImage: env.BaseImage, Image: env.Image, ImageID: env.ImageID,
		Python: env.Python(), VenvPath: env.VenvPath, CondaName: env.CondaName, PythonPath: env.PythonPath,
		Requirements: env.Requirements, Layers: env.Depth,
		Index: IndexView{IndexURL: idx.URL, ExtraIndexURL: idx.ExtraURL, Wheelhouse: idx.Wheelhouse, Network: orDefault(idx.Network, "index"),
			AllowSdist: idx.AllowSdist},
	}
}

func (h *handlers) limitsView() *LimitsView {
	l := h.cfg.Sandbox.Limits()
	return &LimitsView{TimeoutS: l.Timeout.Seconds(), MaxTimeoutS: h.cfg.MaxTimeout.Seconds(), MemoryBytes: l.Memory,
		CPUs: l.CPUs, Pids: l.Pids, OutputBytes: l.OutputBytes, MaxCodeBytes: h.cfg.MaxCodeBytes}
}

// envError turns environment failures into tool errors the model can act on.
func (h *handlers) envError(ctx context.Context, what string, err error) error {
	switch {
	// First: a check that could not run says so, not that the environment is bad.
	case errors.Is(err, sandbox.ErrBusy):
		return sandbox.ErrBusy
	case errors.Is(err, sandbox.ErrUnreachable), errors.Is(err, context.Canceled):
		return h.readyError(ctx, err)
	case errors.Is(err, images.ErrBadRequirement), images.IsBadEnvironment(err):
		return err
	case errors.Is(err, images.ErrInstallFailed), errors.Is(err, images.ErrLayerBudget):
		return err
	}
	return h.internal(ctx, what, err)
}

func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}
