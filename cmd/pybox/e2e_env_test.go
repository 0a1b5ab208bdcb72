//go:build !windows

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/pybox-dev/pybox/images"
	"github.com/pybox-dev/pybox/internal/engine"
	"github.com/pybox-dev/pybox/internal/testenv"
	"github.com/pybox-dev/pybox/tools"
)

const runtimeBase = "pybox-runtime:base"

// configure calls configure_environment and fails the test on a tool error.
func (s *server) configure(args map[string]any) tools.EnvironmentView {
	s.t.Helper()
	res := s.call("configure_environment", args)
	if res.IsError {
		s.t.Fatalf("configure %v: %s", args, text(res))
	}
	return decode[tools.EnvironmentView](s.t, res)
}

// check calls check_installed_packages for one package.
func (s *server) check(name string) images.PackageStatus {
	s.t.Helper()
	res := s.call("check_installed_packages", map[string]any{"packages": []string{name}})
	if res.IsError {
		s.t.Fatalf("check %s: %s", name, text(res))
	}
	return decode[tools.CheckInstalledPackagesOutput](s.t, res).Packages[0]
}

// python runs code and returns stdout and stderr joined, so a failed
// import shows up in what the test compares.
func (s *server) python(code string) string {
	s.t.Helper()
	out, res := s.exec(map[string]any{"code": code})
	if res.IsError {
		s.t.Fatalf("execute_code: %s", text(res))
	}
	return out.Stdout + out.Stderr
}

// refusedKeepsEnv calls tool, which must refuse with an error containing
// wantErr and leave the environment and its saved state as they were.
func (s *server) refusedKeepsEnv(t *testing.T, statePath, tool string, args map[string]any, wantErr string) {
	t.Helper()
	before, savedBefore := s.envConfig(), readFile(t, statePath)
	res := s.call(tool, args)
	if !res.IsError || !strings.Contains(text(res), wantErr) {
		t.Errorf("isError=%v text=%q; want a tool error containing %q", res.IsError, text(res), wantErr)
	}
	if diff := cmp.Diff(before, s.envConfig()); diff != "" {
		t.Errorf("the environment changed (-before +after):\n%s", diff)
	}
	if saved := readFile(t, statePath); saved != savedBefore {
		t.Errorf("the saved state changed:\n%s\n->\n%s", savedBefore, saved)
	}
}

func imageID(t *testing.T, eng *engine.Client, ref string) string {
	t.Helper()
	img, found, err := eng.InspectImage(t.Context(), ref)
	if err != nil || !found {
		t.Fatalf("inspect %s: found=%v err=%v", ref, found, err)
	}
	return img.ID
}

// TestConfigureRoundTrip: each combination that works here takes effect,
// get_environment_config reports it, and programs run in that Python.
func TestConfigureRoundTrip(t *testing.T) {
	parallelTest(t)
	s := startServer(t)
	venv := []string{"/opt/venv/bin/python"}
	tests := []struct {
		name   string
		args   map[string]any
		want   tools.EnvironmentView // image_id, index and requirements are filled in
		prefix string                // sys.prefix of a program
	}{
		{"image with system python", map[string]any{"type": "image", "image": runtimeBase, "python_path": "/usr/bin/python3"},
			tools.EnvironmentView{Type: "image", BaseImage: runtimeBase, Python: []string{"/usr/bin/python3"}, PythonPath: "/usr/bin/python3"}, "/usr"},
		{"venv-uv default", map[string]any{"type": "venv-uv"},
			tools.EnvironmentView{Type: "venv-uv", Variant: "base", BaseImage: runtimeBase, Python: venv, VenvPath: "/opt/venv"}, "/opt/venv"},
		{"venv on the runtime", map[string]any{"type": "venv", "venv_path": "/opt/venv"},
			tools.EnvironmentView{Type: "venv", Variant: "base", BaseImage: runtimeBase, Python: venv, VenvPath: "/opt/venv"}, "/opt/venv"},
		{"venv in a named image", map[string]any{"type": "venv", "image": runtimeBase},
			tools.EnvironmentView{Type: "venv", BaseImage: runtimeBase, Python: venv, VenvPath: "/opt/venv"}, "/opt/venv"},
		{"image with python3 on PATH", map[string]any{"type": "image", "image": runtimeBase},
			tools.EnvironmentView{Type: "image", BaseImage: runtimeBase, Python: []string{"python3"}, PythonPath: "python3"}, "/opt/venv"},
		{"venv-uv datascience", map[string]any{"type": "venv-uv", "variant": "datascience"},
			tools.EnvironmentView{Type: "venv-uv", Variant: "datascience", BaseImage: images.Tag("datascience"), Python: venv, VenvPath: "/opt/venv"}, "/opt/venv"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.want.Variant == "datascience" {
				testenv.RuntimeImage(t, s.eng, "datascience") // built on first use, like the plot tests
			}
			tt.want.Image, tt.want.ImageID = tt.want.BaseImage, imageID(t, s.eng, tt.want.BaseImage)
			tt.want.Requirements, tt.want.Index = []string{}, tools.IndexView{Network: "index"}
			got := s.configure(tt.args)
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("configure_environment %v (-want +got):\n%s", tt.args, diff)
			}
			shown := s.envConfig()
			if shown.Limits == nil {
				t.Errorf("get_environment_config shows no limits")
			}
			shown.Limits = nil
			if diff := cmp.Diff(got, shown); diff != "" {
				t.Errorf("get_environment_config differs from what configure returned (-configured +shown):\n%s", diff)
			}
			if out := s.python("import sys; print(sys.prefix)"); out != tt.prefix+"\n" {
				t.Errorf("sys.prefix = %q; want %q", out, tt.prefix+"\n")
			}
		})
	}
}

// TestConfigureRejectsAndChangesNothing: a wrong combination is a tool error
// saying what is wrong; the environment, its saved state and where
// programs run stay as they were.
func TestConfigureRejectsAndChangesNothing(t *testing.T) {
	parallelTest(t)
	stateDir := t.TempDir()
	s := startServer(t, "PYBOX_STATE_DIR="+stateDir, testAllowedImages)
	s.configure(map[string]any{"type": "image", "image": runtimeBase, "python_path": "/usr/bin/python3"})
	statePath := filepath.Join(stateDir, "environment.json")
	tests := []struct {
		name    string
		args    map[string]any
		wantErr string
	}{
		{"venv with conda_name", map[string]any{"type": "venv", "conda_name": "ds"}, "not conda_name"},
		{"conda without conda_name", map[string]any{"type": "conda", "image": runtimeBase}, `conda_name ""`},
		{"image without image", map[string]any{"type": "image"}, "needs image"},
		{"unknown type", map[string]any{"type": "pyenv"}, `type "pyenv" is not one of`},
		{"venv_path with ..", map[string]any{"type": "venv", "venv_path": "../x"}, `venv_path "../x"`},
		{"relative venv_path", map[string]any{"type": "venv-uv", "venv_path": "venv"}, `venv_path "venv"`},
		{"image not present", map[string]any{"type": "image", "image": "pybox-test-nosuch:latest"}, "pybox-test-nosuch:latest does not exist locally"},
		{"image not allowed", map[string]any{"type": "image", "image": "pybox-test-unlisted:latest"}, `image "pybox-test-unlisted:latest" is not allowed`},
		{"image by an ID prefix", map[string]any{"type": "image", "image": "0c"}, "looks like an image ID"},
		{"venv_path without python", map[string]any{"type": "venv", "venv_path": "/nonexistent"}, "Python does not start"},
		{"conda in an image without conda", map[string]any{"type": "conda", "conda_name": "ds"}, "Python does not start"},
		{"unknown variant", map[string]any{"type": "venv-uv", "variant": "huge"}, `unknown image variant "huge"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s.refusedKeepsEnv(t, statePath, "configure_environment", tt.args, tt.wantErr)
		})
	}
	if out := s.python("import sys; print(sys.prefix)"); out != "/usr\n" {
		t.Errorf("after the rejected calls programs run with prefix %q; want the configured /usr", out)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestEnvironmentSurvivesRestart: a server started with the same
// configuration and state dir resumes the environment, its packages and the
// lineages it remembers; a changed configuration wins over the saved state.
func TestEnvironmentSurvivesRestart(t *testing.T) {
	layerTest(t)
	wh, stateDir := testenv.Wheelhouse(t), t.TempDir()
	s1 := packageServer(t, wh, "PYBOX_STATE_DIR="+stateDir)
	a := s1.install("pyboxbase==1.0")
	s1.configure(map[string]any{"type": "image", "image": runtimeBase, "python_path": "/opt/venv/bin/python"})
	s1.install("pyboxother")
	before := s1.envConfig()
	s1.close()

	s2 := packageServer(t, wh, "PYBOX_STATE_DIR="+stateDir)
	if diff := cmp.Diff(before, s2.envConfig()); diff != "" {
		t.Errorf("environment after a restart (-before +after):\n%s", diff)
	}
	const probe = "import importlib.util as u; print([m for m in ('pyboxbase', 'pyboxother') if u.find_spec(m)])"
	if out := s2.python(probe); out != "['pyboxother']\n" {
		t.Errorf("importable after the restart: %s; want only pyboxother", out)
	}
	back := s2.configure(map[string]any{"type": "venv-uv"})
	if back.Image != a.Image || !cmp.Equal(back.Requirements, []string{"pyboxbase==1.0"}) {
		t.Errorf("switching back after the restart: image %s requirements %v; want %s with pyboxbase==1.0", back.Image, back.Requirements, a.Image)
	}
	s2.close()

	s3 := packageServer(t, wh, "PYBOX_STATE_DIR="+stateDir, "ENV_TYPE=venv", "VENV_PATH=/opt/venv")
	got := s3.envConfig()
	want := tools.EnvironmentView{Type: "venv", Variant: "base", BaseImage: runtimeBase, Image: runtimeBase, ImageID: imageID(t, s3.eng, runtimeBase),
		Python: []string{"/opt/venv/bin/python"}, VenvPath: "/opt/venv", Index: got.Index, Limits: got.Limits}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("a changed configuration should start fresh from it (-want +got):\n%s", diff)
	}
	if out := s3.python(probe); out != "[]\n" {
		t.Errorf("importable with the changed configuration: %s; want none", out)
	}
}

// venv2Dockerfile makes a second venv whose site-packages the install
// user owns, as a user image must for pybox to install into it.
const venv2Dockerfile = `FROM ` + runtimeBase + `
USER root
RUN /usr/bin/python3 -m venv /opt/venv2 && chown -R 10002:10002 "$(/opt/venv2/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
USER 10001:10001
`

// TestEnvironmentCachesDoNotMix: environments keep their own packages,
// layers and package listings, and switching back restores the old one.
func TestEnvironmentCachesDoNotMix(t *testing.T) {
	eng := testenv.Docker(t)
	layerTest(t, func() {
		testenv.RuntimeImage(t, eng, "base")
		testenv.BuildImage(t, eng, venv2Image, venv2Dockerfile, nil)
	})
	s := packageServer(t, testenv.Wheelhouse(t), testAllowedImages)
	a := s.install("pyboxbase==1.0")
	if st := s.check("pyboxbase"); !st.Installed || st.Version != "1.0" {
		t.Fatalf("env A: pyboxbase %+v; want 1.0", st)
	}

	b := s.configure(map[string]any{"type": "venv", "image": venv2Image, "venv_path": "/opt/venv2"})
	if b.Image != venv2Image || len(b.Requirements) != 0 || !cmp.Equal(b.Python, []string{"/opt/venv2/bin/python"}) {
		t.Errorf("env B: %+v; want the venv2 image with no requirements", b)
	}
	if st := s.check("pyboxbase"); st.Installed {
		t.Errorf("env B reports env A's pyboxbase: %+v", st)
	}
	inB := s.install("pyboxbase==2.0")
	if inB.Cached || inB.Installer != "pip" || inB.Image == a.Image {
		t.Errorf("install in B: cached=%v installer=%q image %s (A's %s); want a real pip install into a new layer", inB.Cached, inB.Installer, inB.Image, a.Image)
	}
	if out := s.python("import sys, pyboxbase; print(pyboxbase.VERSION, sys.prefix)"); out != "2.0 /opt/venv2\n" {
		t.Errorf("env B runs: %q; want pyboxbase 2.0 in /opt/venv2", out)
	}

	back := s.configure(map[string]any{"type": "venv-uv"})
	if back.Image != a.Image || !cmp.Equal(back.Requirements, a.Requirements) {
		t.Errorf("back to A: image %s requirements %v; want A's %s %v", back.Image, back.Requirements, a.Image, a.Requirements)
	}
	if st := s.check("pyboxbase"); st.Version != "1.0" {
		t.Errorf("back to A: pyboxbase %+v; want 1.0", st)
	}
	if out := s.python("import pyboxbase; print(pyboxbase.VERSION)"); out != "1.0\n" {
		t.Errorf("back to A runs: %q; want pyboxbase 1.0", out)
	}

	// The same image with another interpreter is another environment: A's
	// package listing must not answer for it.
	s.configure(map[string]any{"type": "image", "image": a.Image, "python_path": "/usr/bin/python3"})
	if st := s.check("pyboxbase"); st.Installed {
		t.Errorf("system python in A's image reports A's venv package: %+v", st)
	}
	if out := s.python("import importlib.util as u; print(u.find_spec('pyboxbase'))"); out != "None\n" {
		t.Errorf("system python in A's image finds pyboxbase: %q", out)
	}
}

// condaScript stands in for conda: only `conda --version` and
// `conda run --no-capture-output -n NAME CMD [ARG...]`, which execs
// CMD from /opt/conda-envs/NAME/bin.
const condaScript = `#!/bin/sh
if [ "$1" = --version ]; then echo "conda 24.1.0 (pybox test stand-in)"; exit 0; fi
if [ "$1" != run ] || [ "$2" != --no-capture-output ] || [ "$3" != -n ] || [ $# -lt 5 ]; then
	echo "fake conda: only 'conda run --no-capture-output -n NAME CMD...' is implemented" >&2
	exit 2
fi
prefix=/opt/conda-envs/$4
shift 4
if [ ! -d "$prefix" ]; then
	echo "EnvironmentLocationNotFound: Not a conda environment: $prefix" >&2
	exit 1
fi
cmd=$1
shift
exec "$prefix/bin/$cmd" "$@"
`

// condaDockerfile has two envs: ds, whose site-packages the install user
// owns, and rootonly, left as root made it.
const condaDockerfile = `FROM ` + runtimeBase + `
USER root
COPY conda /usr/local/bin/conda
RUN chown root:root /usr/local/bin/conda && chmod 0755 /usr/local/bin/conda && /usr/bin/python3 -m venv /opt/conda-envs/ds && \
    chown -R 10002:10002 "$(/opt/conda-envs/ds/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" && \
    /usr/bin/python3 -m venv /opt/conda-envs/rootonly
USER 10001:10001
`

// TestCondaEnvironment drives the conda plumbing (conda run for programs,
// probes and pip installs) against a stand-in conda; an env whose
// site-packages the install user cannot write is refused clearly.
func TestCondaEnvironment(t *testing.T) {
	eng := testenv.Docker(t)
	layerTest(t, func() {
		testenv.RuntimeImage(t, eng, "base")
		testenv.BuildImage(t, eng, condaImage, condaDockerfile, map[string]string{"conda": condaScript})
	})
	s := packageServer(t, testenv.Wheelhouse(t), testAllowedImages)

	before := s.envConfig()
	res := s.call("configure_environment", map[string]any{"type": "conda", "conda_name": "nosuch", "image": condaImage})
	if !res.IsError || !strings.Contains(text(res), "Python does not start") || !strings.Contains(text(res), "nosuch") {
		t.Errorf("conda_name nosuch: isError=%v text=%q; want a tool error naming it", res.IsError, text(res))
	}
	if diff := cmp.Diff(before, s.envConfig()); diff != "" {
		t.Errorf("a rejected conda environment changed the active one (-before +after):\n%s", diff)
	}

	env := s.configure(map[string]any{"type": "conda", "conda_name": "ds", "image": condaImage})
	wantPy := []string{"conda", "run", "--no-capture-output", "-n", "ds", "python"}
	if env.CondaName != "ds" || env.BaseImage != condaImage || !cmp.Equal(env.Python, wantPy) {
		t.Errorf("conda environment: %+v; want ds in %s started with %v", env, condaImage, wantPy)
	}
	if out := s.python("import sys; print(sys.prefix)"); out != "/opt/conda-envs/ds\n" {
		t.Errorf("sys.prefix in the conda environment: %q", out)
	}
	inst := s.install("pyboxdemo")
	if inst.Cached || inst.Installer != "pip" {
		t.Errorf("install into conda: cached=%v installer=%q; want a real pip install", inst.Cached, inst.Installer)
	}
	if out := s.python("import sys, pyboxdemo; print(pyboxdemo.answer(), pyboxdemo.__file__.startswith(sys.prefix))"); out != "42 True\n" {
		t.Errorf("pyboxdemo in the conda environment: %q; want it imported from the env", out)
	}
	if st := s.check("pyboxdemo"); !st.Installed || st.Version != "1.0" {
		t.Errorf("check in the conda environment: %+v; want pyboxdemo 1.0", st)
	}

	s.configure(map[string]any{"type": "conda", "conda_name": "rootonly", "image": condaImage})
	res = s.call("install_dependencies", map[string]any{"packages": []string{"pyboxdemo"}})
	const want = "site-packages /opt/conda-envs/rootonly/lib/python3.11/site-packages is not writable by the unprivileged install user 10002"
	if !res.IsError || !strings.Contains(text(res), want) {
		t.Errorf("install into a conda env the install user cannot write: isError=%v text=%q; want a tool error saying %q", res.IsError, text(res), want)
	}
}
