//go:build !windows

package main

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/internal/testenv"
)

// TestServerInContainer: pybox's server image (cmd/pybox/Dockerfile) runs
// with the host's Docker socket mounted. With code storage at a path that
// only exists in its container, it refuses to start and says how to mount
// it; with a host folder mounted at the same path, a client over HTTP
// writes a file and a program reads it, and stopping the container
// removes every sandbox.
func TestServerInContainer(t *testing.T) {
	parallelTest(t) // its image, containers, folders and port are its own
	eng := testenv.Docker(t)
	testenv.RuntimeImage(t, eng, "base")
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "pybox"), ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("static build: %v\n%s", err, out)
	}
	df, _ := os.ReadFile("Dockerfile")
	os.WriteFile(filepath.Join(dir, "Dockerfile"), df, 0o644)
	tag := "pybox-server-test:" + randomHex(t, 4)
	if out, err := exec.Command("docker", "build", "-q", "--build-arg", "BASE=pybox-rootfs:bookworm-base", "-t", tag, dir).CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("docker", "rmi", "-f", tag).Run() })
	host := t.TempDir()
	run := func(name string, args ...string) *exec.Cmd {
		base := []string{"run", "--name", name, "--network", "host", "-v", "/var/run/docker.sock:/var/run/docker.sock", "-e", "PYBOX_BUILD=never"}
		return exec.Command("docker", append(append(base, args...), tag)...)
	}
	// Wrong: the storage is /data inside, another path on the host.
	wrong := "pybox-server-wrong-" + randomHex(t, 4)
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", wrong).Run() })
	cmd := run(wrong, "-v", host+":/data", "-e", "CODE_STORAGE_DIR=/data/code", "-e", "PYBOX_STATE_DIR=/data/state")
	cmd.Args = append(cmd.Args, "serve", "--http", "127.0.0.1:0")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "is not the folder /data/code on the Docker host") || !strings.Contains(string(out), "same path") {
		t.Errorf("storage not shared with the host: %v\n%s", err, out)
	}
	// Right: the host folder at the same path.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	right := "pybox-server-right-" + randomHex(t, 4)
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", right).Run() })
	cmd = run(right, "-d", "-v", host+":"+host, "-e", "CODE_STORAGE_DIR="+host+"/code", "-e", "PYBOX_STATE_DIR="+host+"/state")
	cmd.Args = append(cmd.Args, "serve", "--http", addr)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker run: %v\n%s", err, out)
	}
	logs := func() string { b, _ := exec.Command("docker", "logs", right).CombinedOutput(); return string(b) }
	h := &httpServer{t: t, url: "http://" + addr}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if resp, err := http.Get(h.url + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server in a container never became healthy:\n%s", logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	cs := h.connect("")
	if res, out := callOK(t, cs, "write_file", map[string]any{"path": "in.txt", "content": "from the client"}); res.IsError {
		t.Fatalf("write_file: %s\n%s", out, logs())
	}
	if _, out := callOK(t, cs, "execute_code", map[string]any{"code": "print(open('in.txt').read()); open('out.txt', 'w').write('from the sandbox')"}); !strings.Contains(out, "from the client") {
		t.Errorf("the program did not read the file the client wrote: %s\n%s", out, logs())
	}
	if b, err := os.ReadFile(filepath.Join(host, "code", "out.txt")); err != nil || string(b) != "from the sandbox" {
		t.Errorf("the sandbox's file on the host: %q %v", b, err)
	}
	cs.Close()
	if out, err := exec.Command("docker", "stop", "-t", "30", right).CombinedOutput(); err != nil {
		t.Fatalf("docker stop: %v\n%s", err, out)
	}
	for _, c := range testenv.Managed(t, eng, nil) {
		if strings.HasPrefix(c.Labels["pybox.lease"], host+"/") { // the server in the container's own
			t.Errorf("sandbox left after the server's container stopped: %s %v\n%s", c.Name, c.Labels, logs())
		}
	}
	if code := strings.TrimSpace(func() string {
		b, _ := exec.Command("docker", "inspect", "-f", "{{.State.ExitCode}}", right).Output()
		return string(b)
	}()); code != "0" {
		t.Errorf("the server exited with %s on SIGTERM:\n%s", code, logs())
	}

}
