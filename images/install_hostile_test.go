package images_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/pybox-dev/pybox/images"
	"github.com/pybox-dev/pybox/internal/engine"
	"github.com/pybox-dev/pybox/internal/testenv"
)

// Environments the attacks run in: the runtime image, where the install
// user owns only the package directories; an image laid out as the runtime
// image was before that (root owns the whole venv), which the install user
// cannot write; and a carelessly prepared image whose whole venv,
// interpreter links and pyvenv.cfg included, the install user owns, so only
// the check of the install container's changes stands in the way.
const (
	envRuntime      = "runtime image"
	envRootOwned    = "venv owned by root"
	envInstallOwned = "venv owned by the install user"
)

var testImages = map[string]string{
	envRootOwned: `FROM pybox-runtime:base
USER root
RUN chown -R root:root /opt/venv && chmod 0755 /opt/venv/bin
USER 10001:10001
`,
	envInstallOwned: `FROM pybox-runtime:base
USER root
RUN chown -R 10002:10002 /opt/venv && chmod 0755 /opt/venv/bin
USER 10001:10001
`,
}

// hostile is an installer on a wheelhouse holding the hostile sdist (and
// the standard wheels) with the environments to attack.
type hostile struct {
	eng    *engine.Client
	layers *testenv.Layers
	in     *images.Installer
	envs   map[string]images.Environment
}

// newHostile sets up the installer and the named environments, and checks
// at the end that no container of the test is left.
func newHostile(t *testing.T, idx images.Index, envs ...string) *hostile {
	t.Helper()
	eng := testenv.Docker(t)
	testenv.RuntimeImage(t, eng, images.VariantBase)
	wh := testenv.Wheelhouse(t)
	testenv.WriteHostileSdist(t, wh)
	owner := newTestOwner(t)
	idx.Wheelhouse, idx.Network = wh, "none"
	h := &hostile{eng: eng, in: &images.Installer{Engine: eng, Owner: owner, Index: idx}, envs: map[string]images.Environment{}}
	for _, name := range envs {
		want := images.Environment{}
		if df, ok := testImages[name]; ok {
			// The test's own tag: its build needs no layer-cache lock.
			tag := fmt.Sprintf("pybox-test-install-%s:%s", strings.ReplaceAll(name, " ", "-"), owner.id)
			testenv.BuildImage(t, eng, tag, df, nil)
			want = images.Environment{Type: images.EnvVenv, BaseImage: tag}
		}
		env, err := want.Normalize()
		if err != nil {
			t.Fatal(err)
		}
		env.ImageID = inspect(t, eng, env.Image).ID
		h.envs[name] = env
	}
	h.layers = testenv.LockLayerCache(t, eng) // from here: installs
	t.Cleanup(func() {
		if left := testenv.Managed(t, eng, map[string]string{"pybox.owner": owner.id}); len(left) > 0 {
			t.Errorf("containers left behind: %v", left)
		}
	})
	return h
}

// TestInstallRefusesSdistByDefault: with the default settings a source
// distribution is not built (its build backend would run arbitrary code):
// the install fails saying how to allow it, and nothing is committed. In
// a venv the install user cannot write, the install is refused before
// anything runs.
func TestInstallRefusesSdistByDefault(t *testing.T) {
	h := newHostile(t, images.Index{}, envRuntime, envRootOwned, envInstallOwned)
	wantErr := map[string]string{
		envRuntime:      "PYBOX_ALLOW_SDIST=true",
		envRootOwned:    "not writable by the unprivileged install user 10002",
		envInstallOwned: "PYBOX_ALLOW_SDIST=true",
	}
	for name, env := range h.envs {
		t.Run(name, func(t *testing.T) {
			res, err := h.in.Install(t.Context(), env, []string{testenv.HostileSdistName})
			if err == nil {
				removeAtCleanup(t, h.eng, res.Env.ImageID)
				t.Fatalf("the sdist was built and committed by default as layer %s; its build saw (uid caps nnp /tmp /etc-write /etc/pybox-pwned-in-layer): %s",
					res.Env.Image, runOutput(t, h.eng, res.Env.ImageID, testenv.HostileReport))
			}
			if !errors.Is(err, images.ErrInstallFailed) || !strings.Contains(err.Error(), wantErr[name]) {
				t.Errorf("error %q; want ErrInstallFailed saying %q", err, wantErr[name])
			}
			if name != envRootOwned && !strings.Contains(err.Error(), "no wheel found for "+testenv.HostileSdistName) {
				t.Errorf("error %q does not name %s as the package without a wheel", err, testenv.HostileSdistName)
			}
			h.layers.NoneWith(t, testenv.HostileSdistName)
		})
	}
}

// TestInstallSdistBuildIsUnprivileged: when sdists are allowed, the build
// backend runs as the install user with no capabilities, no new
// privileges and a tmpfs /tmp: in the runtime image its writes to /etc and
// the venv itself fail and the layer has neither file (its .pth in
// site-packages is allowed: any wheel may ship one). Where the install
// user owns the whole venv, its write to the venv succeeds and the check of
// the container's changes refuses the install.
func TestInstallSdistBuildIsUnprivileged(t *testing.T) {
	h := newHostile(t, images.Index{AllowSdist: true}, envRuntime, envInstallOwned)
	t.Run(envRuntime, func(t *testing.T) {
		res, err := h.in.Install(t.Context(), h.envs[envRuntime], []string{testenv.HostileSdistName})
		if err != nil {
			t.Fatalf("install with sdists allowed: %v\n%s", err, res.Output)
		}
		removeAtCleanup(t, h.eng, res.Env.ImageID)
		if got := runOutput(t, h.eng, res.Env.ImageID, testenv.HostileReport); got != testenv.HostileReportUnprivileged {
			t.Errorf("the build saw (uid caps nnp /tmp /etc-write prefix-write /etc-file prefix-file):\n got %q\nwant %q",
				got, testenv.HostileReportUnprivileged)
		}
	})
	t.Run(envInstallOwned, func(t *testing.T) {
		refused(t, h, h.envs[envInstallOwned], testenv.HostileSdistName, "/opt/venv/pybox-pwned (added)")
	})
}

// TestInstallRunsAsInstallUser: what an install writes belongs to the
// unprivileged install user, never root; the layer's configuration keeps
// the parent's user and command, and none of the installer's settings.
func TestInstallRunsAsInstallUser(t *testing.T) {
	h := newHostile(t, images.Index{}, envRuntime)
	res, err := h.in.Install(t.Context(), h.envs[envRuntime], []string{"pyboxbase==1.0"})
	if err != nil {
		t.Fatalf("install: %v\n%s", err, res.Output)
	}
	removeAtCleanup(t, h.eng, res.Env.ImageID)
	const owners = "import os, pyboxbase; print(os.stat(pyboxbase.__file__).st_uid, os.stat(os.path.dirname(pyboxbase.__file__)).st_uid)"
	if got := runOutput(t, h.eng, res.Env.ImageID, owners); got != "10002 10002\n" {
		t.Errorf("owner uids of the installed module and its directory: %q; want the install user's 10002", got)
	}
	parent, layer := inspect(t, h.eng, h.envs[envRuntime].ImageID), inspect(t, h.eng, res.Env.ImageID)
	if layer.User != parent.User || !slices.Equal(layer.Cmd, parent.Cmd) {
		t.Errorf("the layer's user %q and command %v; want the parent's %q and %v", layer.User, layer.Cmd, parent.User, parent.Cmd)
	}
	for _, kv := range layer.Env {
		if !slices.Contains(parent.Env, kv) && !strings.HasPrefix(kv, "HOME=") {
			t.Errorf("the install container's %s is in the layer's environment", kv)
		}
	}
}

// hostileWheels write outside the package directories of /opt/venv.
var hostileWheels = []struct {
	name  string
	files map[string]string // archive members, with NAME for the distribution name
	path  string            // what the refusal must name (when the diff check refuses)
}{
	{"replaces the interpreter", map[string]string{"NAME-1.0.data/scripts/python": "#!/bin/sh\necho pwned\n"}, "/opt/venv/bin/python"},
	{"replaces pyvenv.cfg", map[string]string{"NAME-1.0.data/data/pyvenv.cfg": "home = /tmp\n"}, "/opt/venv/pyvenv.cfg"},
	{"adds a file to the venv root", map[string]string{"NAME-1.0.data/data/pybox-pwned": "x\n"}, "/opt/venv/pybox-pwned"},
	{"adds a module beside site-packages", map[string]string{"NAME-1.0.data/data/lib/python3.11/pyboxpwned.py": "x = 1\n"},
		"/opt/venv/lib/python3.11/pyboxpwned.py"},
}

// TestInstallRefusesHostileWheels: a wheel whose data files land outside
// the package directories is refused and nothing is committed, whether
// file ownership stops it or only the check of the container's changes.
func TestInstallRefusesHostileWheels(t *testing.T) {
	h := newHostile(t, images.Index{}, envRuntime, envRootOwned, envInstallOwned)
	wantErr := map[string]func(path string) string{
		envRuntime:      func(string) string { return "" }, // pip itself fails: permission denied
		envRootOwned:    func(string) string { return "not writable by the unprivileged install user 10002" },
		envInstallOwned: func(path string) string { return path },
	}
	for i, w := range hostileWheels {
		name := "pyboxevilwheel" + string(rune('a'+i))
		files := map[string]string{}
		for k, v := range w.files {
			files[strings.ReplaceAll(k, "NAME", name)] = v
		}
		testenv.WriteWheel(t, h.in.Index.Wheelhouse, testenv.Wheel{Name: name, Version: "1.0", Code: "X = 1\n", Files: files})
		for label, env := range h.envs {
			t.Run(w.name+"/"+label, func(t *testing.T) {
				refused(t, h, env, name, wantErr[label](w.path))
			})
		}
	}
}

// refused installs name into env and checks that it failed (naming
// wantErr), that no layer has it and that env's interpreter is intact.
func refused(t *testing.T, h *hostile, env images.Environment, name, wantErr string) {
	t.Helper()
	eng := h.eng
	res, err := h.in.Install(t.Context(), env, []string{name})
	if err == nil {
		removeAtCleanup(t, eng, res.Env.ImageID)
		t.Fatalf("installed and committed as %s; in it (python major, bin/python link, /opt/venv/pybox-pwned, pyvenv.cfg intact): %s",
			res.Env.Image, runOutput(t, eng, res.Env.ImageID, interpreterCheck))
	}
	t.Logf("refused: %v", err)
	if !errors.Is(err, images.ErrInstallFailed) || !strings.Contains(err.Error(), wantErr) {
		t.Errorf("error %q; want ErrInstallFailed naming %q", err, wantErr)
	}
	h.layers.NoneWith(t, name)
	if got := runOutput(t, eng, env.Ref(), interpreterCheck); got != interpreterOK {
		t.Errorf("the environment's interpreter: %q; want %q", got, interpreterOK)
	}
}

const (
	interpreterCheck = `import os, sys; print(sys.version_info[0], os.readlink("/opt/venv/bin/python"), ` +
		`os.path.exists("/opt/venv/pybox-pwned"), open("/opt/venv/pyvenv.cfg").read().startswith("home = /usr/bin"))`
	interpreterOK = "3 python3 False True\n"
)

// runOutput runs code with the venv's python in image as the sandbox user,
// with no network, and returns stdout and stderr, or why it did not run.
func runOutput(t *testing.T, eng *engine.Client, image, code string) string {
	t.Helper()
	var out bytes.Buffer
	owner := newTestOwner(t)
	_, err := eng.Run(t.Context(), engine.Spec{
		Name: owner.ContainerName("check"),
		Config: &container.Config{Image: image, User: images.SandboxUser, Labels: owner.Labels("check"),
			Cmd: []string{images.VenvPython, "-c", code}, NetworkDisabled: true},
		Host:   &container.HostConfig{NetworkMode: "none", CapDrop: []string{"ALL"}},
		Stdout: &out, Stderr: &out, Timeout: time.Minute,
	})
	if err != nil {
		return "did not run: " + err.Error()
	}
	return out.String()
}
