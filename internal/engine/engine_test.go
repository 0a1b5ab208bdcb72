package engine_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"

	"github.com/pybox-dev/pybox/images"
	"github.com/pybox-dev/pybox/internal/engine"
	"github.com/pybox-dev/pybox/internal/testenv"
)

// testLabel marks this package's containers so each test can check that
// none is left.
const testLabel = "pybox.test.engine"

// spec is a minimal hardened-enough container running cmd in the base image.
func spec(t *testing.T, image string, cmd ...string) engine.Spec {
	return engine.Spec{
		Name: "pybox-enginetest-" + strings.ToLower(strings.NewReplacer("/", "-", "=", "-").Replace(t.Name())) + "-" + time.Now().Format("150405.000000"),
		Config: &container.Config{Image: image, Cmd: cmd, User: images.SandboxUser, NetworkDisabled: true,
			Labels:       map[string]string{"pybox.managed": "true", testLabel: t.Name(), "pybox.role": "test"},
			AttachStdout: true, AttachStderr: true},
		Host: &container.HostConfig{NetworkMode: "none", Init: ptr(true), LogConfig: container.LogConfig{Type: "none"}},
	}
}

func ptr[T any](v T) *T { return &v }

// noInit runs the command as pid 1, so a missing command fails the start
// itself (with an init process it would be the init's exit status 127).
func noInit(sp engine.Spec) engine.Spec {
	sp.Host.Init = ptr(false)
	return sp
}

// slowReader is an endless stdin that takes its time with every read.
type slowReader struct{}

func (slowReader) Read(p []byte) (int, error) {
	time.Sleep(50 * time.Millisecond)
	return copy(p, strings.Repeat("x", len(p))), nil
}

func setup(t *testing.T) (*engine.Client, string) {
	t.Helper()
	eng := testenv.Docker(t)
	img := testenv.RuntimeImage(t, eng, "base")
	t.Cleanup(func() {
		if left := testenv.Managed(t, eng, map[string]string{testLabel: t.Name()}); len(left) != 0 {
			t.Errorf("containers left behind: %v", left)
			for _, c := range left {
				_ = eng.Remove(context.Background(), c.ID) // best effort; the failure is reported above
			}
		}
	})
	return eng, img
}

// noGoroutine fails when a goroutine whose stack mentions frame is still
// alive after a short grace period.
func noGoroutine(t *testing.T, frame string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, frame) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a goroutine in %s outlived its call:\n%s", frame, stacks)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRunStartFailureEndsItsWait: a container whose start is refused (here
// its command does not exist, as with a user image's wrong python path) is
// removed and leaves no goroutine waiting for its exit.
func TestRunStartFailureEndsItsWait(t *testing.T) {
	eng, img := setup(t)
	for range 3 {
		_, err := eng.Run(t.Context(), noInit(spec(t, img, "/nonexistent/python")))
		if err == nil || !strings.Contains(err.Error(), "start container") {
			t.Fatalf("Run with a missing command: err = %v; want a start failure", err)
		}
	}
	noGoroutine(t, "ContainerWait")
}

// TestStartAttachedFailureEndsItsWait: the same for a session's container.
func TestStartAttachedFailureEndsItsWait(t *testing.T) {
	eng, img := setup(t)
	if _, err := eng.StartAttached(t.Context(), noInit(spec(t, img, "/nonexistent/python"))); err == nil {
		t.Fatal("StartAttached with a missing command succeeded")
	}
	noGoroutine(t, "ContainerWait")
}

// TestRunWaitsForItsStreams: when Run returns, nothing still reads the
// caller's stdin or writes its output (here the program exits without
// reading an endless stdin).
func TestRunWaitsForItsStreams(t *testing.T) {
	eng, img := setup(t)
	for range 3 {
		sp := spec(t, img, images.VenvPython, "-c", "print('bye')")
		sp.Config.AttachStdin, sp.Config.OpenStdin, sp.Config.StdinOnce = true, true, true
		sp.Stdin = slowReader{}
		var out strings.Builder
		sp.Stdout = &out
		exit, err := eng.Run(t.Context(), sp)
		if err != nil || exit.Code != 0 || out.String() != "bye\n" {
			t.Fatalf("Run: exit %+v err %v stdout %q", exit, err, out.String())
		}
		buf := make([]byte, 1<<20)
		if stacks := string(buf[:runtime.Stack(buf, true)]); strings.Contains(stacks, "engine.feed") {
			t.Fatalf("stdin is still being fed after Run returned:\n%s", stacks)
		}
	}
}

// TestDestroyWhileNobodyReads: a session container that keeps writing
// while no program is being collected is destroyed promptly, not blocked
// on output that nobody reads.
func TestDestroyWhileNobodyReads(t *testing.T) {
	eng, img := setup(t)
	a, err := eng.StartAttached(t.Context(), spec(t, img, images.VenvPython, "-c",
		"import os\nwhile True: os.write(1, b'x' * 65536)"))
	if err != nil {
		t.Fatal(err)
	}
	// Wait until the container's output is queued up in front of the reader.
	if _, err := io.ReadFull(a.Stdout, make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	destroyed := make(chan error, 1)
	go func() { destroyed <- a.Destroy(context.Background()) }()
	select {
	case err := <-destroyed:
		if err != nil {
			t.Fatalf("Destroy: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Destroy still blocked after 30s")
	}
	select {
	case <-a.Done():
	default:
		t.Error("Done is not closed after Destroy")
	}
}

// TestCreateCancelledMidwayLeavesNothing: a caller that gives up while the
// daemon is creating its container gets an error and no container stays
// behind (the daemon may finish a create whose answer the client dropped).
func TestCreateCancelledMidwayLeavesNothing(t *testing.T) {
	eng, img := setup(t)
	for i := range 40 {
		ctx, cancel := context.WithTimeout(t.Context(), time.Duration(i)*time.Millisecond)
		id, err := eng.Create(ctx, spec(t, img, images.VenvPython, "-c", "pass"))
		cancel()
		if err == nil {
			if err := eng.Remove(t.Context(), id); err != nil {
				t.Fatal(err)
			}
		}
	}
	// setup's cleanup fails the test if any container is left.
}

// TestCreateRefusesASymlinkedBindSource: Create refuses a bind mount
// through a symlink (which a program could have swapped in) and leaves no
// container; the real folder is accepted and verified after creation.
func TestCreateRefusesASymlinkedBindSource(t *testing.T) {
	eng, img := setup(t)
	dir := t.TempDir()
	link := filepath.Join(t.TempDir(), "ws")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	sp := spec(t, img, images.VenvPython, "-c", "pass")
	sp.Host.Mounts = []mount.Mount{{Type: mount.TypeBind, Source: link, Target: "/workspace"}}
	if _, err := eng.Create(t.Context(), sp); !errors.Is(err, engine.ErrMount) {
		t.Fatalf("Create through a symlink: %v; want ErrMount", err)
	}
	sp.Host.Mounts[0].Source = dir
	id, err := eng.Create(t.Context(), sp)
	if err != nil {
		t.Fatalf("Create with the real folder: %v", err)
	}
	if err := eng.Remove(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	// setup's cleanup fails the test if any container is left.
}

// TestWatchContainerCreates: the watch counts exactly the creations of
// containers with its labels between its start and its stop, less the
// skipped ones, with stop called right after the last one (no pause for
// the daemon's stream: the marks in it are the ends).
func TestWatchContainerCreates(t *testing.T) {
	eng, img := setup(t)
	run := func(role string) { t.Helper(); runRole(t, eng, img, role) }
	run("test") // before the watch, within the second its stream replays: not counted
	mine := map[string]string{testLabel: t.Name()}
	for round := range 3 {
		stop := eng.WatchContainerCreates(t.Context(), mine, "pybox.role", "pool")
		run("test")
		run("pool")
		run("test")
		n, err := stop()
		if err != nil || n != 2 {
			t.Errorf("round %d: %d creations counted (%v); want 2", round, n, err)
		}
	}
}

// runRole runs a container of true in img with label pybox.role.
func runRole(t *testing.T, eng *engine.Client, img, role string) {
	t.Helper()
	sp := spec(t, img, "true")
	sp.Config.Labels["pybox.role"] = role
	if _, err := eng.Run(t.Context(), sp); err != nil {
		t.Fatal(err)
	}
}

// TestWatchCreatesMatch: WatchCreates hands each container creation of the
// watch, and only those (not the marks' volumes, not a creation made
// before it), to its match, and counts the ones it accepts.
func TestWatchCreatesMatch(t *testing.T) {
	eng, img := setup(t)
	run := func(role string) { t.Helper(); runRole(t, eng, img, role) }
	run("before")
	var seen []string
	stop := eng.WatchCreates(t.Context(), func(labels map[string]string) bool {
		if labels[testLabel] != t.Name() {
			return false // another test's, on a shared daemon
		}
		seen = append(seen, labels["pybox.role"])
		return labels["pybox.role"] != "skipped"
	})
	for _, role := range []string{"a", "skipped", "b"} {
		run(role)
	}
	n, err := stop()
	if err != nil || n != 2 || !slices.Equal(seen, []string{"a", "skipped", "b"}) {
		t.Errorf("counted %d (%v), match saw %q; want 2, and a, skipped, b in order", n, err, seen)
	}
}
