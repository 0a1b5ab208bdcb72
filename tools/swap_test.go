package tools

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pybox-dev/pybox/images"
	"github.com/pybox-dev/pybox/internal/storage"
	"github.com/pybox-dev/pybox/internal/testenv"
	"github.com/pybox-dev/pybox/sandbox"
)

// imageEnvs is an environment manager whose active environment is one
// image; nothing else of it is used.
type imageEnvs struct {
	fakeEnvs
	image string
}

func (e imageEnvs) Active() images.Environment {
	return images.Environment{Type: images.EnvImage, Image: e.image, PythonPath: images.VenvPython}
}

// runHandlers are handlers over a real sandbox (the daemon, the runtime
// image) and a fresh code storage, with a guard that refuses any program
// saying FORBIDDEN; ready runs after the tool checked the program, before
// it runs.
func runHandlers(t *testing.T, runtime string, ready func(context.Context) error) *handlers {
	t.Helper()
	return runHandlersWith(t, sandbox.Config{Runtime: runtime}, ready)
}

// runHandlersWith is runHandlers with cfg's settings for the sandbox, and
// a sessions folder beside code storage.
func runHandlersWith(t *testing.T, cfg sandbox.Config, ready func(context.Context) error) *handlers {
	t.Helper()
	eng := testenv.Docker(t)
	img := testenv.RuntimeImage(t, eng, "base")
	store, err := storage.Open(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	sessions, err := storage.Open(filepath.Join(t.TempDir(), "sessions"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sessions.Close() })
	cfg.Engine, cfg.Image, cfg.RunsDir = eng, img, t.TempDir()
	cfg.StorageDirs = []string{store.Path(), sessions.Path()}
	sb, err := sandbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sb.Close)
	guard := func(code string) error {
		if strings.Contains(code, "FORBIDDEN") {
			return errGuardTest
		}
		return nil
	}
	return &handlers{cfg: Config{Sandbox: sb, Storage: store, Sessions: sessions, Envs: imageEnvs{fakeEnvs{t}, img}, Ready: ready, Guard: guard,
		MaxCodeBytes: 1 << 20, MaxInputBytes: 1 << 20, MaxFileBytes: 1 << 20, MaxTimeout: DefaultMaxTimeout, Log: slog.New(slog.DiscardHandler)}}
}

var errGuardTest = errors.New("the guard refused the program")

// TestCheckedFileIsWhatRuns: execute_code_file checks a file (regular,
// in code storage, passing the policy's guard) and then runs it. Another
// program of the same owner, running beside, may swap the file between
// the check and the run: for new content (which the guard would have
// refused), for a symlink to another file of the workspace, or for one to
// a host file outside code storage. What runs is what was checked, in
// every case. Before the fix the container opened the path again: the
// swapped content ran (guard bypassed) and the symlinks were followed.
func TestCheckedFileIsWhatRuns(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "outside.py")
	if err := os.WriteFile(outside, []byte("print('outside ran')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	swaps := []struct {
		name string
		swap func(dir string) error
	}{
		{"content the guard refuses", func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "main.py"), []byte("print('FORBIDDEN swapped content ran')\n"), 0o644)
		}},
		{"symlink inside the workspace", func(dir string) error {
			return swapForSymlink(filepath.Join(dir, "main.py"), "other.py")
		}},
		{"symlink out of code storage", func(dir string) error {
			return swapForSymlink(filepath.Join(dir, "main.py"), outside)
		}},
	}
	for _, rt := range testenv.Runtimes(t, testenv.Docker(t)) {
		for _, sw := range swaps {
			t.Run(testenv.RuntimeName(rt)+"/"+sw.name, func(t *testing.T) { checkedFileRuns(t, rt, sw.swap) })
		}
	}
}

func checkedFileRuns(t *testing.T, rt string, swap func(dir string) error) {
	var h *handlers
	h = runHandlers(t, rt, func(context.Context) error { return swap(h.cfg.Storage.Path()) })
	putFile(t, h, "main.py", []byte("print('checked')\n"))
	putFile(t, h, "other.py", []byte("print('FORBIDDEN other file ran')\n"))
	res, out, err := h.executeCodeFile(t.Context(), nil, ExecuteCodeFileInput{FilePath: "main.py"})
	if err != nil {
		t.Fatalf("execute_code_file: %v", err)
	}
	if out.ExitCode != 0 || out.Stdout != "checked\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q: want the checked program's output alone\n%v",
			out.ExitCode, out.Stdout, out.Stderr, res.Content)
	}
}

// swapForSymlink replaces path by a symlink to target, atomically (as a
// program would: a rename over it).
func swapForSymlink(path, target string) error {
	tmp := path + ".swap"
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// TestCodeFileRunsAsRead: the file's bytes reach the runner as they were
// read: a Latin-1 source (not UTF-8) runs with its coding declaration, and
// a zip archive runs its __main__.py, as `python FILE` does.
func TestCodeFileRunsAsRead(t *testing.T) {
	var zipped bytes.Buffer
	zw := zip.NewWriter(&zipped)
	w, err := zw.Create("__main__.py")
	if err == nil {
		_, err = w.Write([]byte("print('zipped main ran')\n"))
	}
	if err := errors.Join(err, zw.Close()); err != nil {
		t.Fatal(err)
	}
	h := runHandlers(t, "", func(context.Context) error { return nil })
	putFile(t, h, "latin.py", []byte("# -*- coding: latin-1 -*-\nprint('caf\xe9')\n"))
	putFile(t, h, "app.pyz", zipped.Bytes())
	for file, want := range map[string]string{"latin.py": "café\n", "app.pyz": "zipped main ran\n"} {
		_, out, err := h.executeCodeFile(t.Context(), nil, ExecuteCodeFileInput{FilePath: file})
		if err != nil || out.ExitCode != 0 || out.Stdout != want {
			t.Errorf("%s: exit %d, stdout %q, stderr %q, error %v; want %q", file, out.ExitCode, out.Stdout, out.Stderr, err, want)
		}
	}
}
