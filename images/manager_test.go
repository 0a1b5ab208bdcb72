package images_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pybox-dev/pybox/images"
	"github.com/pybox-dev/pybox/internal/testenv"
)

// fakeProber fails every probe with err, or answers the interpreter check
// as CPython 3.11 at /opt/venv/bin/python would, and any other probe with out.
type fakeProber struct {
	out string
	err error
}

func (p fakeProber) Probe(_ context.Context, _ string, _ []string, code string) (string, error) {
	if p.err != nil {
		return "", p.err
	}
	if _, rest, ok := strings.Cut(code, "hashlib.sha256(b'"); ok {
		nonce, _, _ := strings.Cut(rest, "'")
		sum := sha256.Sum256([]byte(nonce))
		return `{"proof": "` + hex.EncodeToString(sum[:]) + `", "implementation": "cpython", "version": [3, 11, 2], ` +
			`"executable": "/opt/venv/bin/python"}` + "\n", nil
	}
	return p.out, nil
}

// newManager returns a started Manager on the real daemon whose installs
// come from wh with no network, persisting to statePath ("" = none).
func newManager(t *testing.T, prober images.Prober, wh, statePath string) *images.Manager {
	t.Helper()
	eng := testenv.Docker(t)
	testenv.LockLayerCache(t, eng)
	testenv.RuntimeImage(t, eng, images.VariantBase)
	in := &images.Installer{Engine: eng, Owner: newTestOwner(t), Index: images.Index{Wheelhouse: wh, Network: "none"}}
	m, err := images.NewManager(images.ManagerConfig{
		EnsureRuntime: func(context.Context, string) error { return nil },
		Installer:     in, Prober: prober, StatePath: statePath,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context(), images.Environment{}); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return m
}

var errProbeBusy = errors.New("the sandbox is busy")

// TestConfigureKeepsProbeInfraErrors: when the probe could not run (busy,
// Docker gone), Configure's error still says so, so the tools do not
// report a good environment as one whose Python does not start; the
// environment is unchanged.
func TestConfigureKeepsProbeInfraErrors(t *testing.T) {
	m := newManager(t, fakeProber{err: errProbeBusy}, "", "")
	before := m.Active()
	_, err := m.Configure(t.Context(), images.Environment{Type: images.EnvVenv})
	if !errors.Is(err, errProbeBusy) {
		t.Errorf("Configure error %v; want it to wrap the probe's error", err)
	}
	if !images.IsBadEnvironment(err) {
		t.Errorf("Configure error %v is no longer a bad-environment error", err)
	}
	if got := m.Active(); got.Type != before.Type || got.Image != before.Image {
		t.Errorf("a failed Configure changed the environment: %+v -> %+v", before, got)
	}
}

// TestUnwritableStateDir: a state file that cannot be written costs the
// persistence, not the server: Start and Configure still work.
func TestUnwritableStateDir(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	m := newManager(t, fakeProber{out: "3.11"}, "", filepath.Join(notDir, "environment.json"))
	env, err := m.Configure(t.Context(), images.Environment{Type: images.EnvVenv})
	if err != nil || env.Type != images.EnvVenv || m.Active().Type != images.EnvVenv {
		t.Errorf("Configure with an unwritable state dir: %+v, %v; want the switch to happen", env, err)
	}
}

// TestSharedStateKeepsLineages: two servers sharing a state directory do
// not erase each other's remembered environments, so switching back
// restores packages the other installed and gc keeps their layers.
func TestSharedStateKeepsLineages(t *testing.T) {
	wh := testenv.Wheelhouse(t)
	state := filepath.Join(t.TempDir(), "environment.json")
	a := newManager(t, fakeProber{out: "3.11"}, wh, state)
	b := newManager(t, fakeProber{out: "3.11"}, wh, state)
	res, err := a.Install(t.Context(), []string{"pyboxbase==1.0"})
	if err != nil {
		t.Fatalf("install: %v\n%s", err, res.Output)
	}
	removeAtCleanup(t, testenv.Docker(t), res.Env.ImageID)
	// Another lineage on the same (base) image: no other image is needed.
	if _, err := b.Configure(t.Context(), images.Environment{Type: images.EnvVenv}); err != nil {
		t.Fatalf("configure venv: %v", err)
	}
	refs, err := images.StateImages(state)
	if err != nil || !slices.Contains(refs, res.Env.Image) {
		t.Errorf("state images %v (%v); want them to include %s, installed by the other server", refs, err, res.Env.Image)
	}
	back, err := b.Configure(t.Context(), images.Environment{})
	if err != nil || !slices.Equal(back.Requirements, []string{"pyboxbase==1.0"}) {
		t.Errorf("switching back: requirements %v (%v); want the other server's [pyboxbase==1.0]", back.Requirements, err)
	}
}
