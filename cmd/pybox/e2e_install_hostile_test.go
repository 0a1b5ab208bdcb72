//go:build !windows

package main

import (
	"path/filepath"
	"testing"

	"github.com/pybox-dev/pybox/internal/testenv"
)

// rootVenvDockerfile lays the venv out as the runtime image did before it
// had an install user: root owns all of it.
const rootVenvDockerfile = `FROM ` + runtimeBase + `
USER root
RUN chown -R root:root /opt/venv && chmod 0755 /opt/venv/bin
USER 10001:10001
`

// TestHostileInstallChangesNothing: a source distribution (whose build
// would write /etc) is refused by default, and any install into a venv the
// install user cannot write is refused before the installer runs; each refusal is a tool error saying what
// to do, and the environment, its saved state, the layers and what programs
// see are as before.
func TestHostileInstallChangesNothing(t *testing.T) {
	eng := testenv.Docker(t)
	layerTest(t, func() {
		testenv.RuntimeImage(t, eng, "base")
		testenv.BuildImage(t, eng, rootVenvImage, rootVenvDockerfile, nil)
	})
	wh, stateDir := testenv.Wheelhouse(t), t.TempDir()
	testenv.WriteHostileSdist(t, wh)
	s := packageServer(t, wh, "PYBOX_STATE_DIR="+stateDir, testAllowedImages)
	statePath := filepath.Join(stateDir, "environment.json")
	tests := []struct {
		name    string
		env     map[string]any // configured first
		install string
		wantErr string
	}{
		{"sdist", map[string]any{"type": "venv-uv"}, testenv.HostileSdistName, "PYBOX_ALLOW_SDIST=true"},
		{"venv the install user cannot write", map[string]any{"type": "venv", "image": rootVenvImage},
			testenv.HostileSdistName, "is not writable by the unprivileged install user 10002"},
		{"system python", map[string]any{"type": "image", "image": runtimeBase, "python_path": "/usr/bin/python3"},
			"pyboxother", "site-packages /usr/local/lib/python3.11/dist-packages is not writable by the unprivileged install user 10002"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s.configure(tt.env)
			s.refusedKeepsEnv(t, statePath, "install_dependencies", map[string]any{"packages": []string{tt.install}}, tt.wantErr)
			s.layers.NoneWith(t, tt.install)
			const probe = "import os, importlib.util as u; print(os.path.exists('/etc/pybox-pwned'), u.find_spec('pyboxevilsdist'))"
			if out := s.python(probe); out != "False None\n" {
				t.Errorf("programs see (/etc/pybox-pwned exists, pyboxevilsdist): %q; want False None", out)
			}
		})
	}
}

// TestSdistAllowedByPolicy: the permissive policy lets installs build
// source distributions, and the build runs as the unprivileged install
// user: its write to /etc fails and programs do not see the file.
func TestSdistAllowedByPolicy(t *testing.T) {
	layerTest(t)
	wh := testenv.Wheelhouse(t)
	testenv.WriteHostileSdist(t, wh)
	s := packageServer(t, wh, "PYBOX_POLICY=permissive")
	if got := s.envConfig().Index; !got.AllowSdist {
		t.Errorf("index under the permissive policy: %+v; want sdists allowed", got)
	}
	s.install(testenv.HostileSdistName)
	if out := s.python(testenv.HostileReport); out != testenv.HostileReportUnprivileged {
		t.Errorf("the build saw (uid caps nnp /tmp /etc-write prefix-write /etc-file prefix-file):\n got %q\nwant %q",
			out, testenv.HostileReportUnprivileged)
	}
}
