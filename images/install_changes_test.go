package images

import (
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
)

// TestPackageDirsAllow: the rule deciding which changes of an install
// container may be committed, for a venv, a conda env (whose standard
// library and libpython live in the prefix) and a system Python.
func TestPackageDirsAllow(t *testing.T) {
	venv := packageDirs{Prefix: "/opt/venv", Purelib: "/opt/venv/lib/python3.11/site-packages",
		Platlib: "/opt/venv/lib/python3.11/site-packages", Scripts: "/opt/venv/bin", Data: "/opt/venv"}
	conda := packageDirs{Prefix: "/opt/conda/envs/ds", Purelib: "/opt/conda/envs/ds/lib/python3.12/site-packages",
		Platlib: "/opt/conda/envs/ds/lib/python3.12/site-packages", Scripts: "/opt/conda/envs/ds/bin", Data: "/opt/conda/envs/ds"}
	system := packageDirs{Prefix: "/usr", Purelib: "/usr/local/lib/python3.11/dist-packages",
		Platlib: "/usr/local/lib/python3.11/dist-packages", Scripts: "/usr/local/bin", Data: "/usr/local"}
	const (
		C = container.ChangeModify
		A = container.ChangeAdd
		D = container.ChangeDelete
	)
	tests := []struct {
		dirs packageDirs
		kind container.ChangeType
		path string
		want bool
	}{
		// The package directories and what is in them.
		{venv, A, "/opt/venv/lib/python3.11/site-packages/pkg/__init__.py", true},
		{venv, D, "/opt/venv/lib/python3.11/site-packages/old-1.0.dist-info/RECORD", true},
		{venv, A, "/opt/venv/lib/python3.11/site-packages/evil.pth", true},
		{venv, C, "/opt/venv/lib/python3.11/site-packages", true},
		{venv, D, "/opt/venv/lib/python3.11/site-packages", false},
		{venv, A, "/opt/venv/bin/pkg-tool", true},
		{venv, C, "/opt/venv/bin/pip", true},
		{venv, C, "/opt/venv/bin", true},
		{venv, A, "/opt/venv/share/jupyter/kernels/k/kernel.json", true},
		{venv, A, "/opt/venv/include/site/python3.11/pkg/pkg.h", true},
		{venv, A, "/opt/venv/etc/jupyter/jupyter_server_config.d/pkg.json", true},
		// Directories on the way to them, marked modified by the copy-up.
		{venv, C, "/opt", true},
		{venv, C, "/opt/venv", true},
		{venv, C, "/opt/venv/lib", true},
		{venv, C, "/opt/venv/lib/python3.11", true},
		{venv, C, "/", true},
		// The interpreter, the venv itself and everything else.
		{venv, C, "/opt/venv/bin/python", false},
		{venv, D, "/opt/venv/bin/python3", false},
		{venv, A, "/opt/venv/bin/python3.11", false},
		{venv, A, "/opt/venv/bin/python-evil/x", false},
		{venv, C, "/opt/venv/pyvenv.cfg", false},
		{venv, A, "/opt/venv/evil", false},
		{venv, A, "/opt/venv/lib/python3.11/os.py", false},
		{venv, A, "/opt/venv/lib/python3.11/site-packages-evil", false},
		{venv, D, "/opt/venv/lib", false},
		{venv, A, "/opt/venv/lib/python3.11", false},
		{venv, A, "/etc/pybox-pwned", false},
		{venv, C, "/etc", false},
		{venv, A, "/usr/lib/python3.11/sitecustomize.py", false},
		{venv, A, "/wheelhouse", false},
		{venv, A, "/opt/venv/lib/python3.11/site-packages/../../../../etc/x", false},
		{venv, A, "opt/venv/lib/python3.11/site-packages/x", false},
		// conda: the standard library, libpython and conda's own files in
		// the prefix are not package directories.
		{conda, A, "/opt/conda/envs/ds/lib/python3.12/site-packages/pkg/mod.py", true},
		{conda, A, "/opt/conda/envs/ds/bin/pkg-tool", true},
		{conda, C, "/opt/conda/envs/ds/lib/python3.12/os.py", false},
		{conda, C, "/opt/conda/envs/ds/lib/libpython3.12.so.1.0", false},
		{conda, A, "/opt/conda/envs/ds/conda-meta/evil.json", false},
		{conda, A, "/opt/conda/envs/ds/etc/conda/activate.d/evil.sh", false},
		{conda, A, "/opt/conda/envs/ds/etc/conda", false},
		{conda, A, "/opt/conda/envs/ds/etc/jupyter/x.json", true},
		{conda, A, "/opt/conda/envs/ds/.condarc", false},
		{conda, A, "/opt/conda/bin/conda", false},
		// A system Python installs under /usr/local.
		{system, A, "/usr/local/lib/python3.11/dist-packages/pkg/__init__.py", true},
		{system, A, "/usr/local/bin/pkg-tool", true},
		{system, C, "/usr/local/bin/python3", false},
		{system, A, "/usr/lib/python3.11/os.py", false},
		{system, A, "/usr/local/lib/libevil.so", false},
	}
	for _, tt := range tests {
		c := container.FilesystemChange{Kind: tt.kind, Path: tt.path}
		if got := tt.dirs.allows(c); got != tt.want {
			t.Errorf("%s %s in %s: allowed %v; want %v", tt.kind, tt.path, tt.dirs.Prefix, got, tt.want)
		}
	}
}

// TestOutsideErrorNamesThePaths: the refusal lists the paths it refused
// (the first ten) and says nothing was committed.
func TestOutsideErrorNamesThePaths(t *testing.T) {
	d := packageDirs{Purelib: "/v/lib/site-packages", Platlib: "/v/lib/site-packages", Scripts: "/v/bin", Data: "/v"}
	var changes []container.FilesystemChange
	for _, p := range []string{"/v/bin/python", "/v/pyvenv.cfg", "/v/lib/site-packages/ok.py"} {
		changes = append(changes, container.FilesystemChange{Kind: container.ChangeModify, Path: p})
	}
	for i := range 12 {
		changes = append(changes, container.FilesystemChange{Kind: container.ChangeAdd, Path: "/etc/x" + string(rune('a'+i))})
	}
	err := d.outsideError(d.refusedChanges(changes)).Error()
	for _, want := range []string{"/v/bin/python (changed)", "/v/pyvenv.cfg (changed)", "/etc/xa (added)", "and 4 more", "nothing was committed"} {
		if !strings.Contains(err, want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err, "ok.py") {
		t.Errorf("error %q names an allowed change", err)
	}
}
