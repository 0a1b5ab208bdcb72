package images

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/pybox-dev/pybox/internal/engine"
)

// requireDocker returns a client for the real daemon. It skips the test
// when none answers, unless PYBOX_REQUIRE_DOCKER=1, which makes that a failure.
func requireDocker(t *testing.T) *engine.Client {
	t.Helper()
	skipShort(t)
	eng, err := engine.New(nil)
	if err == nil {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		_, err = eng.Ping(ctx)
	}
	if err != nil {
		if os.Getenv("PYBOX_REQUIRE_DOCKER") == "1" {
			t.Fatalf("Docker is required (PYBOX_REQUIRE_DOCKER=1) but not reachable: %v", err)
		}
		t.Skipf("Docker not reachable: %v", err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

// testBuilder returns a Builder whose log and progress go to the test log;
// progress lines are also kept, for assertions.
func testBuilder(t *testing.T, eng *engine.Client) (*Builder, *lineLog) {
	lines := &lineLog{t: t}
	return &Builder{Engine: eng, Log: slog.New(slog.NewTextHandler(lines, nil)), Progress: lines}, lines
}

// freshBuilder is testBuilder for a test that builds: under a repository
// of its own, so that no build, finished or failed, touches the machine's
// pybox-runtime and pybox-rootfs images. Its tags go at cleanup.
func freshBuilder(t *testing.T, eng *engine.Client) *Builder {
	b, _ := testBuilder(t, eng)
	b.Repo = fmt.Sprintf("pybox-test-runtime-%d-%d", os.Getpid(), time.Now().UnixNano())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, v := range []string{VariantBase, VariantDatascience} {
			for _, ref := range []string{b.tag(v), b.rootfsTag(v)} {
				if _, found, err := eng.InspectImage(ctx, ref); err == nil && found {
					if err := eng.RemoveImage(ctx, ref); err != nil {
						t.Errorf("remove the test's image %s: %v", ref, err)
					}
				}
			}
		}
	})
	return b
}

// lineLog writes to the test log and remembers what was written.
type lineLog struct {
	t   *testing.T
	mu  sync.Mutex
	all strings.Builder
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all.Write(p)
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (l *lineLog) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.all.String(), substr)
}

// sandboxRun runs argv in image as the sandbox user with no network and
// returns stdout; a non-zero exit fails the test with stderr.
func sandboxRun(t *testing.T, eng *engine.Client, image string, host *container.HostConfig,
	env []string, argv ...string) string {
	t.Helper()
	if host == nil {
		host = &container.HostConfig{}
	}
	host.NetworkMode = "none"
	var stdout, stderr bytes.Buffer
	exit, err := eng.Run(t.Context(), engine.Spec{
		Config: &container.Config{
			Image: image, User: SandboxUser, Cmd: argv, Env: env, NetworkDisabled: true,
		},
		Host:   host,
		Stdout: &stdout, Stderr: &stderr,
		Timeout: 2 * time.Minute,
	})
	if err != nil {
		t.Fatalf("run in %s: %v", image, err)
	}
	if exit.Code != 0 {
		t.Fatalf("run in %s: exit %d\nstdout: %s\nstderr: %s", image, exit.Code, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// skipShort is testenv.SkipShort, which this package's tests cannot import
// (testenv imports images): under -short the Docker tests skip, unless a
// PYBOX_REQUIRE_* variable says they must run, when they fail.
func skipShort(t *testing.T) {
	t.Helper()
	if !testing.Short() {
		return
	}
	for _, kv := range os.Environ() {
		if name, value, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "PYBOX_REQUIRE_") && value != "" {
			t.Fatalf("-short skips the tests that need the Docker daemon, but %s says they must run: unset it or drop -short", name)
		}
	}
	t.Skip("-short: needs the Docker daemon")
}
