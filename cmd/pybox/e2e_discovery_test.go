//go:build linux

package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pybox-dev/pybox/internal/testenv"
)

// hiddenDocker runs pybox with args in a private mount namespace where
// /var/run/docker.sock is covered by an empty file, after the real socket
// was bind-mounted at each of binds (files the caller made). Only env,
// with no DOCKER_* or XDG_RUNTIME_DIR variable of this process, reaches it.
func hiddenDocker(t *testing.T, binds []string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for a mount namespace")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare (util-linux)")
	}
	testenv.Docker(t)
	empty := filepath.Join(t.TempDir(), "empty")
	noErr(t, os.WriteFile(empty, nil, 0o600))
	const script = `set -e
while [ "$1" != -- ]; do mount --bind /var/run/docker.sock "$1"; shift; done; shift
mount --bind "$0" /var/run/docker.sock
exec "$@"`
	argv := append(append([]string{"-m", "--propagation", "private", "sh", "-c", script, empty}, binds...), "--", pyboxBin)
	cmd := exec.Command("unshare", append(argv, args...)...)
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "DOCKER_") || strings.HasPrefix(kv, "XDG_RUNTIME_DIR=") || strings.HasPrefix(kv, "HOME=")
	})
	cmd.Env = append(cmd.Env, "PYBOX_BUILD=never", "CODE_STORAGE_DIR="+t.TempDir(), "PYBOX_STATE_DIR="+t.TempDir())
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// placeholder makes an empty file at path (and its folders), for a bind mount.
func placeholder(t *testing.T, path string) string {
	t.Helper()
	noErr(t, os.MkdirAll(filepath.Dir(path), 0o700))
	noErr(t, os.WriteFile(path, nil, 0o600))
	return path
}

func output(t *testing.T, cmd *exec.Cmd) (string, int) {
	t.Helper()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("run %v: %v", cmd.Args, err)
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

// TestDiscoveryCLIContext: with /var/run/docker.sock hidden, pybox reaches
// the daemon through the docker CLI's current context (in DOCKER_CONFIG),
// whose endpoint is the daemon's socket at another path; doctor says so
// and its self-test runs there.
func TestDiscoveryCLIContext(t *testing.T) {
	parallelTest(t)
	dir := t.TempDir()
	sock := placeholder(t, filepath.Join(dir, "engine", "docker.sock"))
	cfg := filepath.Join(dir, "dockercfg")
	sum := sha256.Sum256([]byte("e2e"))
	meta := filepath.Join(cfg, "contexts", "meta", hex.EncodeToString(sum[:]), "meta.json")
	noErr(t, os.MkdirAll(filepath.Dir(meta), 0o700))
	noErr(t, os.WriteFile(meta, []byte(`{"Name":"e2e","Metadata":{},"Endpoints":{"docker":{"Host":"unix://`+sock+`","SkipTLSVerify":false}}}`), 0o600))
	noErr(t, os.WriteFile(filepath.Join(cfg, "config.json"), []byte(`{"auths":{},"currentContext":"e2e"}`), 0o600))
	home := t.TempDir()
	out, code := output(t, hiddenDocker(t, []string{sock}, []string{"HOME=" + home, "DOCKER_CONFIG=" + cfg}, "doctor"))
	want := "OK   engine                 unix://" + sock + " (the docker CLI's current context e2e"
	if code != 0 || !strings.Contains(out, want) || !strings.Contains(out, "OK   self-test") {
		t.Errorf("doctor: exit %d; want 0 with %q and a self-test:\n%s", code, want, out)
	}
}

// TestDiscoveryDockerDesktopSocket: with /var/run/docker.sock hidden and
// no setting at all, pybox finds the daemon at Docker Desktop's socket,
// ~/.docker/run/docker.sock, and runs a program there.
func TestDiscoveryDockerDesktopSocket(t *testing.T) {
	parallelTest(t)
	home := t.TempDir()
	sock := placeholder(t, filepath.Join(home, ".docker", "run", "docker.sock"))
	cmd := hiddenDocker(t, []string{sock}, []string{"HOME=" + home}, "run", "-")
	cmd.Stdin = strings.NewReader("print(6 * 7)")
	if out, code := output(t, cmd); code != 0 || !strings.Contains(out, "42") {
		t.Errorf("pybox run: exit %d; want 0 and 42:\n%s", code, out)
	}
	out, code := output(t, hiddenDocker(t, []string{sock}, []string{"HOME=" + home}, "doctor"))
	if want := "unix://" + sock + " (Docker Desktop): the first of the usual places that answered"; code != 0 || !strings.Contains(out, want) {
		t.Errorf("doctor: exit %d; want 0 with %q:\n%s", code, want, out)
	}
}

// TestDiscoveryNoEngine: with no engine anywhere, doctor and the tools
// answer with the same list of every place pybox looked, and what to do.
func TestDiscoveryNoEngine(t *testing.T) {
	parallelTest(t)
	home := t.TempDir()
	places := []string{"1. DOCKER_HOST: not set", "2. DOCKER_CONTEXT: not set", "3. the docker CLI's current context: default (none set)",
		"Docker Desktop unix://" + home + "/.docker/run/docker.sock: no such socket", "Colima unix://", "OrbStack unix://",
		"Rancher Desktop unix://", "Podman machine unix://", "the platform's default unix:///var/run/docker.sock: ",
		"Start your container engine", "set DOCKER_HOST"}
	out, code := output(t, hiddenDocker(t, nil, []string{"HOME=" + home}, "doctor"))
	for _, p := range places {
		if !strings.Contains(out, p) {
			t.Errorf("doctor lacks %q", p)
		}
	}
	if code != 1 || t.Failed() {
		t.Fatalf("doctor: exit %d, want 1:\n%s", code, out)
	}
	// launch sets the environment again: empty values count as unset.
	s := launch(t, nil, hiddenDocker(t, nil, nil, "serve"), "HOME="+home, "DOCKER_HOST=", "DOCKER_CONTEXT=", "DOCKER_CONFIG=", "XDG_RUNTIME_DIR=")
	res := s.call("execute_code", map[string]any{"code": "print(1)"})
	got := text(res)
	if !res.IsError || !strings.Contains(got, "pybox looked for a container engine in these places") {
		t.Fatalf("execute_code: isError=%v %q; want the list of places", res.IsError, got)
	}
	for _, p := range places {
		if !strings.Contains(got, p) {
			t.Errorf("the tool error lacks %q:\n%s", p, got)
		}
	}
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
