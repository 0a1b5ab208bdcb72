package app

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pybox-dev/pybox/images"
)

// adoptHostSettings gives settings written for executors that run Python
// on the host (mcp_code_executor) a meaning in pybox's containers, and
// returns what it did, for the log and, once, the model:
//   - VENV_PATH (ENV_TYPE=venv) or UV_VENV_PATH (venv-uv) naming a venv on
//     this host: its distributions (name==version) are installed into the
//     sandbox's own venv as a cached layer, with PREINSTALLED_PACKAGES; the
//     variable then no longer names a venv inside the image.
//   - CONDA_ENV_NAME without ENV_TYPE and without an image (mcp_code_executor
//     defaults to conda): the sandbox's venv is used, and the note says how
//     to use conda instead.
func (c *Config) adoptHostSettings() []string {
	var notes []string
	for _, v := range []struct {
		name string
		path *string
		typ  string
	}{{"VENV_PATH", &c.VenvPath, images.EnvVenv}, {"UV_VENV_PATH", &c.UVVenvPath, images.EnvVenvUV}} {
		if *v.path == "" || (c.EnvType != v.typ && !(v.typ == images.EnvVenvUV && c.EnvType == "")) {
			continue
		}
		reqs, ok := hostVenvRequirements(*v.path)
		if !ok {
			continue // a path inside the image, as pybox reads it
		}
		notes = append(notes, fmt.Sprintf("%s=%s is a venv on this host; programs run in the sandbox's own venv, "+
			"into which its %d packages are installed as a cached layer (%s)", v.name, *v.path, len(reqs), strings.Join(reqs, " ")))
		c.hostPackages = append(c.hostPackages, reqs...)
		*v.path = ""
		c.EnvType = images.EnvVenvUV
	}
	if c.CondaName != "" && c.Image == "" && !c.EnvTypeChosen {
		notes = append(notes, fmt.Sprintf("CONDA_ENV_NAME=%s names a conda environment, but the runtime image has no conda: "+
			"programs run in the sandbox's venv (install packages with install_dependencies); to use conda, set ENV_TYPE=conda "+
			"and PYBOX_IMAGE to an image that has conda and that environment", c.CondaName))
		c.CondaName = ""
	}
	return notes
}

// hostVenvRequirements reads the distributions of the venv at path on this
// host (it has a pyvenv.cfg) as name==version requirements; the packaging
// tools every venv has are left out. ok is false when path is no venv here.
func hostVenvRequirements(path string) (reqs []string, ok bool) {
	if _, err := os.Stat(filepath.Join(path, "pyvenv.cfg")); err != nil {
		return nil, false
	}
	metas, _ := filepath.Glob(filepath.Join(path, "lib", "python3*", "site-packages", "*.dist-info", "METADATA"))
	win, _ := filepath.Glob(filepath.Join(path, "Lib", "site-packages", "*.dist-info", "METADATA"))
	for _, m := range append(metas, win...) {
		name, version := distMetadata(m)
		if name == "" || version == "" || slices.Contains([]string{"pip", "setuptools", "wheel", "distribute"}, strings.ToLower(name)) {
			continue
		}
		reqs = append(reqs, name+"=="+version)
	}
	slices.Sort(reqs)
	return slices.Compact(reqs), true
}

// distMetadata reads Name and Version from a METADATA file's headers.
func distMetadata(path string) (name, version string) {
	f, err := os.Open(path)
	if err != nil {
		return "", ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() && sc.Text() != "" {
		if v, ok := strings.CutPrefix(sc.Text(), "Name: "); ok {
			name = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(sc.Text(), "Version: "); ok {
			version = strings.TrimSpace(v)
		}
	}
	return name, version
}
