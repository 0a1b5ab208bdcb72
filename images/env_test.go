package images

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestNormalize: each type keeps only its own fields, fills its defaults,
// and starts at its base whatever install state the input carried.
func TestNormalize(t *testing.T) {
	base, ds := Tag(VariantBase), Tag(VariantDatascience)
	tests := []struct {
		name string
		in   Environment
		want Environment
	}{
		{"zero is venv-uv on the base runtime", Environment{},
			Environment{Type: EnvVenvUV, Variant: VariantBase, BaseImage: base, Image: base, VenvPath: DefaultVenvPath}},
		{"venv-uv datascience", Environment{Type: EnvVenvUV, Variant: VariantDatascience},
			Environment{Type: EnvVenvUV, Variant: VariantDatascience, BaseImage: ds, Image: ds, VenvPath: DefaultVenvPath}},
		{"venv-uv in a user image has no variant", Environment{Type: EnvVenvUV, BaseImage: "my/img:1"},
			Environment{Type: EnvVenvUV, BaseImage: "my/img:1", Image: "my/img:1", VenvPath: DefaultVenvPath}},
		{"venv with its own path", Environment{Type: EnvVenv, VenvPath: "/opt/venv2", BaseImage: "img:2"},
			Environment{Type: EnvVenv, BaseImage: "img:2", Image: "img:2", VenvPath: "/opt/venv2"}},
		{"conda in an image", Environment{Type: EnvConda, CondaName: "ds-1.0_x", BaseImage: "conda:latest"},
			Environment{Type: EnvConda, BaseImage: "conda:latest", Image: "conda:latest", CondaName: "ds-1.0_x"}},
		{"conda without image falls to the runtime", Environment{Type: EnvConda, CondaName: "ds"},
			Environment{Type: EnvConda, Variant: VariantBase, BaseImage: base, Image: base, CondaName: "ds"}},
		{"image defaults python3", Environment{Type: EnvImage, BaseImage: "python:3.12-slim"},
			Environment{Type: EnvImage, BaseImage: "python:3.12-slim", Image: "python:3.12-slim", PythonPath: "python3"}},
		{"image with an interpreter path", Environment{Type: EnvImage, BaseImage: "python:3.12-slim", PythonPath: "/usr/local/bin/python3.12"},
			Environment{Type: EnvImage, BaseImage: "python:3.12-slim", Image: "python:3.12-slim", PythonPath: "/usr/local/bin/python3.12"}},
		{"install state is dropped", Environment{Type: EnvVenv, Image: "pybox-env:abc", ImageID: "sha256:1", Requirements: []string{"x"}, Depth: 3},
			Environment{Type: EnvVenv, Variant: VariantBase, BaseImage: base, Image: base, VenvPath: DefaultVenvPath}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.in.Normalize()
			if err != nil {
				t.Fatalf("Normalize(%+v): %v", tt.in, err)
			}
			tt.want.Requirements = []string{}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Normalize(%+v) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

// TestNormalizeRejects: a wrong combination is a bad-environment error
// naming the argument at fault.
func TestNormalizeRejects(t *testing.T) {
	tests := []struct {
		name    string
		in      Environment
		wantErr string
	}{
		{"unknown type", Environment{Type: "pyenv"}, `type "pyenv" is not one of`},
		{"venv with conda_name", Environment{Type: EnvVenv, CondaName: "ds"}, "not conda_name"},
		{"venv-uv with python_path", Environment{Type: EnvVenvUV, PythonPath: "/usr/bin/python3"}, "not conda_name or python_path"},
		{"relative venv_path", Environment{Type: EnvVenv, VenvPath: "x"}, `venv_path "x"`},
		{"parent venv_path", Environment{Type: EnvVenv, VenvPath: "../x"}, `venv_path "../x"`},
		{"unclean venv_path", Environment{Type: EnvVenvUV, VenvPath: "/opt/../etc"}, `venv_path "/opt/../etc"`},
		{"trailing slash venv_path", Environment{Type: EnvVenv, VenvPath: "/opt/venv/"}, `venv_path "/opt/venv/"`},
		{"venv_path with a space", Environment{Type: EnvVenv, VenvPath: "/opt/my venv"}, "venv_path"},
		{"image and variant", Environment{Type: EnvVenv, BaseImage: "img:1", Variant: VariantBase}, "either image or variant"},
		{"unknown variant", Environment{Type: EnvVenvUV, Variant: "huge"}, `unknown image variant "huge"`},
		{"conda without name", Environment{Type: EnvConda, BaseImage: "conda:latest"}, `conda_name ""`},
		{"conda name with a slash", Environment{Type: EnvConda, CondaName: "../base"}, `conda_name "../base"`},
		{"conda name too long", Environment{Type: EnvConda, CondaName: strings.Repeat("a", 65)}, "conda_name"},
		{"conda with venv_path", Environment{Type: EnvConda, CondaName: "ds", VenvPath: "/opt/venv"}, "not venv_path"},
		{"image without image", Environment{Type: EnvImage}, "needs image"},
		{"image with variant", Environment{Type: EnvImage, BaseImage: "img:1", Variant: VariantBase}, "image and python_path only"},
		{"image with conda_name", Environment{Type: EnvImage, BaseImage: "img:1", CondaName: "ds"}, "image and python_path only"},
		{"python_path with a shell", Environment{Type: EnvImage, BaseImage: "img:1", PythonPath: "python3; rm -rf /"}, "python_path"},
		{"bad image reference", Environment{Type: EnvImage, BaseImage: "Not An Image"}, `image "Not An Image" is not a valid`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.in.Normalize()
			if err == nil {
				t.Fatalf("Normalize(%+v) = %+v; want an error", tt.in, got)
			}
			if !IsBadEnvironment(err) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Normalize(%+v) error %q (bad environment: %v); want a bad-environment error containing %q",
					tt.in, err, IsBadEnvironment(err), tt.wantErr)
			}
		})
	}
}

// TestPython is the interpreter argv of each type.
func TestPython(t *testing.T) {
	tests := []struct {
		in   Environment
		want []string
	}{
		{Environment{}, []string{"/opt/venv/bin/python"}},
		{Environment{Type: EnvVenv, VenvPath: "/opt/venv2"}, []string{"/opt/venv2/bin/python"}},
		{Environment{Type: EnvConda, CondaName: "ds", BaseImage: "conda:latest"},
			[]string{"conda", "run", "--no-capture-output", "-n", "ds", "python"}},
		{Environment{Type: EnvImage, BaseImage: "python:3.12-slim"}, []string{"python3"}},
		{Environment{Type: EnvImage, BaseImage: "python:3.12-slim", PythonPath: "/usr/local/bin/python3"}, []string{"/usr/local/bin/python3"}},
	}
	for _, tt := range tests {
		env, err := tt.in.Normalize()
		if err != nil {
			t.Fatalf("Normalize(%+v): %v", tt.in, err)
		}
		if diff := cmp.Diff(tt.want, env.Python()); diff != "" {
			t.Errorf("Python() of %+v (-want +got):\n%s", tt.in, diff)
		}
	}
}

// TestIdentity: installs keep an environment's identity, equivalent
// configurations share one, and different lineages never collide.
func TestIdentity(t *testing.T) {
	norm := func(e Environment) Environment {
		t.Helper()
		n, err := e.Normalize()
		if err != nil {
			t.Fatalf("Normalize(%+v): %v", e, err)
		}
		return n
	}
	def := norm(Environment{})
	grown := def
	grown.Image, grown.ImageID, grown.Requirements, grown.Depth = "pybox-env:0123", "sha256:abc", []string{"pyboxbase==1.0"}, 2
	if def.identity() != grown.identity() {
		t.Errorf("installing changed the identity:\n%s\n%s", def.identity(), grown.identity())
	}
	if same := norm(Environment{Type: EnvVenvUV, VenvPath: DefaultVenvPath, Variant: VariantBase}); same.identity() != def.identity() {
		t.Errorf("spelled-out defaults have another identity:\n%s\n%s", same.identity(), def.identity())
	}
	// The identity keys the state file's remembered lineages: changing its
	// encoding forgets every user's packages on upgrade.
	const wantDefault = `{"type":"venv-uv","variant":"base","base_image":"pybox-runtime:base","image":"","venv_path":"/opt/venv","requirements":null,"depth":0}`
	if got := def.identity(); got != wantDefault {
		t.Errorf("identity of the default environment = %s; want %s", got, wantDefault)
	}
	distinct := []Environment{
		{}, {Type: EnvVenv}, {Variant: VariantDatascience}, {VenvPath: "/opt/venv2"}, {BaseImage: "img:1"},
		{Type: EnvVenv, BaseImage: "img:1"}, {Type: EnvConda, CondaName: "ds"}, {Type: EnvConda, CondaName: "ds2"},
		{Type: EnvImage, BaseImage: "img:1"}, {Type: EnvImage, BaseImage: "img:1", PythonPath: "/usr/bin/python3"},
	}
	seen := map[string]Environment{}
	for _, e := range distinct {
		id := norm(e).identity()
		if prev, ok := seen[id]; ok {
			t.Errorf("%+v and %+v share identity %s", prev, e, id)
		}
		seen[id] = e
	}
}
