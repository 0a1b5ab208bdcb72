package images

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/pybox-dev/pybox/internal/contract"
)

// Environment types (the ENV_TYPE values of mcp_code_executor, plus image).
const (
	EnvVenvUV = "venv-uv" // the runtime image's venv, installs with uv when the image has it
	EnvVenv   = "venv"    // a venv at VenvPath inside the image, installs with pip
	EnvConda  = "conda"   // a conda env by name inside an image that has conda
	EnvImage  = "image"   // any image, started with PythonPath
)

// DefaultVenvPath is the runtime image's venv.
const DefaultVenvPath = contract.VenvDir

// Environment is a named image lineage plus how to start Python in it. The
// zero value is not usable; build one with Normalize.
type Environment struct {
	Type       string `json:"type"`
	Variant    string `json:"variant,omitempty"`     // runtime variant for runtime-based types
	BaseImage  string `json:"base_image"`            // where the lineage starts
	Image      string `json:"image"`                 // current image: BaseImage or a package layer
	ImageID    string `json:"image_id,omitempty"`    // resolved ID of Image
	VenvPath   string `json:"venv_path,omitempty"`   // venv-uv and venv
	CondaName  string `json:"conda_name,omitempty"`  // conda
	PythonPath string `json:"python_path,omitempty"` // image
	// Executable is the interpreter's absolute path, learnt by the CPython
	// check ("" = not verified yet); see RunPython.
	Executable   string   `json:"executable,omitempty"`
	Requirements []string `json:"requirements"` // canonical specs installed so far, sorted
	Depth        int      `json:"depth"`        // package layers on top of BaseImage
}

var (
	condaName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	imageRef  = regexp.MustCompile(`^[a-z0-9][a-z0-9._/:@-]{0,254}$`)
	errBadEnv = errors.New("invalid environment")
	imagePath = regexp.MustCompile(`^/[A-Za-z0-9._/+-]{0,254}$`)
)

// Normalize fills defaults, checks that the type's fields fit together, and
// returns the environment at its base (no packages yet). Errors wrap errBadEnv
// and say which argument is wrong.
func (e Environment) Normalize() (Environment, error) {
	out := Environment{Type: e.Type, Requirements: []string{}}
	if out.Type == "" {
		out.Type = EnvVenvUV
	}
	var err error
	switch out.Type {
	case EnvVenvUV, EnvVenv:
		err = out.normalizeVenv(e)
	case EnvConda:
		err = out.normalizeConda(e)
	case EnvImage:
		err = out.normalizeImage(e)
	default:
		err = fmt.Errorf("type %q is not one of venv-uv, venv, conda, image", e.Type)
	}
	if err != nil {
		return Environment{}, fmt.Errorf("%w: %w", errBadEnv, err)
	}
	out.Image = out.BaseImage
	return out, nil
}

func (out *Environment) normalizeVenv(e Environment) error {
	if e.CondaName != "" || e.PythonPath != "" {
		return fmt.Errorf("type %s takes venv_path (and variant or image), not conda_name or python_path", out.Type)
	}
	out.VenvPath = orDefaultString(e.VenvPath, DefaultVenvPath)
	if !imagePath.MatchString(out.VenvPath) || path.Clean(out.VenvPath) != out.VenvPath {
		return fmt.Errorf("venv_path %q must be a clean absolute path inside the image", e.VenvPath)
	}
	return out.runtimeBase(e)
}

func (out *Environment) normalizeConda(e Environment) error {
	if e.VenvPath != "" || e.PythonPath != "" {
		return errors.New("type conda takes conda_name (and image), not venv_path or python_path")
	}
	if !condaName.MatchString(e.CondaName) {
		return fmt.Errorf("conda_name %q must be 1-64 letters, digits, '.', '_' or '-'", e.CondaName)
	}
	out.CondaName = e.CondaName
	return out.runtimeBase(e)
}

func (out *Environment) normalizeImage(e Environment) error {
	if e.VenvPath != "" || e.CondaName != "" || e.Variant != "" {
		return errors.New("type image takes image and python_path only")
	}
	if e.BaseImage == "" {
		return errors.New("type image needs image (a local image such as python:3.12-slim)")
	}
	out.PythonPath = orDefaultString(e.PythonPath, "python3")
	if strings.ContainsAny(out.PythonPath, " \t\n'\"$`;&|<>\\") {
		return fmt.Errorf("python_path %q must be a plain command or absolute path", e.PythonPath)
	}
	return out.setImage(e.BaseImage)
}

// runtimeBase picks the image: a user image if given, else the runtime variant.
func (out *Environment) runtimeBase(e Environment) error {
	if e.BaseImage != "" {
		if e.Variant != "" {
			return errors.New("give either image or variant, not both")
		}
		return out.setImage(e.BaseImage)
	}
	v, err := ParseVariant(e.Variant)
	if err != nil {
		return err
	}
	out.Variant = v
	out.BaseImage = Tag(v)
	return nil
}

func (out *Environment) setImage(ref string) error {
	if !imageRef.MatchString(ref) {
		return fmt.Errorf("image %q is not a valid image reference", ref)
	}
	out.BaseImage = ref
	return nil
}

// Python is the argv that starts the environment's interpreter.
func (e Environment) Python() []string {
	switch e.Type {
	case EnvConda:
		return []string{"conda", "run", "--no-capture-output", "-n", e.CondaName, "python"}
	case EnvImage:
		return []string{e.PythonPath}
	}
	return []string{e.VenvPath + "/bin/python"}
}

// RunPython is the argv that starts the environment's interpreter for a
// run: the verified executable itself when known, else Python(). The
// sandbox's runner must be PID 1 of its container, the one process that
// holds the container's streams, so nothing may stay alive around the
// interpreter as `conda run` does.
func (e Environment) RunPython() []string {
	if e.Executable != "" {
		return []string{e.Executable}
	}
	return e.Python()
}

// Ref is the image to run: the resolved ID when known, else the tag.
func (e Environment) Ref() string {
	if e.ImageID != "" {
		return e.ImageID
	}
	return e.Image
}

// IsBadEnvironment reports whether err is a configuration mistake.
func IsBadEnvironment(err error) bool { return errors.Is(err, errBadEnv) }

func orDefaultString(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
