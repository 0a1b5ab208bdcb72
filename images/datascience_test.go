package images

import (
	"bytes"
	"encoding/base64"
	"image/png"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/pybox-dev/pybox/internal/engine"
)

// TestOfflineRecipe pins the offline recipes. Base's must stay byte for
// byte (a change would mark every offline base image stale); datascience
// debootstraps the same set and adds its packages with apt, munkres first.
func TestOfflineRecipe(t *testing.T) {
	const debootstrap = "debootstrap --variant=minbase --include=python3,python3-venv,python3-pip bookworm DIR MIRROR"
	tests := []struct{ variant, want string }{
		{VariantBase, debootstrap},
		{VariantDatascience, debootstrap + " && chroot DIR apt-get -o Dpkg::Use-Pty=0 install -y" +
			" --no-install-recommends python3-munkres python3-numpy python3-pandas python3-matplotlib"},
	}
	for _, tt := range tests {
		if got := recipe(tt.variant, modeOffline); got != tt.want {
			t.Errorf("recipe(%s, offline) = %q, want %q", tt.variant, got, tt.want)
		}
	}
}

// TestDatascienceOffline builds the offline datascience image (slow: a
// debootstrap and an apt install) and runs it as the sandbox does: numpy,
// pandas and matplotlib work, and scipy, which python3-fonttools would pull
// in (with a compiler) through its first alternative, is absent. It runs
// only with PYBOX_TEST_DATASCIENCE=1.
func TestDatascienceOffline(t *testing.T) {
	if os.Getenv("PYBOX_TEST_DATASCIENCE") != "1" {
		t.Skip("set PYBOX_TEST_DATASCIENCE=1 to build and test the datascience image")
	}
	eng := requireDocker(t)
	if err := checkOffline(); err != nil {
		t.Skipf("offline build not possible here: %v", err)
	}
	b := freshBuilder(t, eng)
	start := time.Now()
	img, err := b.Build(t.Context(), BuildOptions{Variant: VariantDatascience, Offline: true})
	if err != nil {
		t.Fatalf("Build(datascience, offline): %v", err)
	}
	t.Logf("Build(datascience, offline): %s, image %s, %d MB",
		time.Since(start).Round(time.Second), shortID(img.ID), img.Size>>20)
	checkImageConfig(t, img, VariantDatascience)

	t.Run("plot", func(t *testing.T) {
		prog := `import base64, numpy, pandas, matplotlib
import matplotlib.pyplot as plt
plt.plot([1, 2, 3]); plt.savefig('/tmp/x.png')
print(base64.b64encode(open('/tmp/x.png', 'rb').read()).decode())`
		stdout, stderr, code := runSandboxed(t, eng, img.ID, VenvPython, "-c", prog)
		if code != 0 {
			t.Fatalf("exit %d\nstderr: %s", code, stderr)
		}
		data, err := base64.StdEncoding.DecodeString(strings.TrimSpace(stdout))
		if err != nil {
			t.Fatalf("output is not base64: %v", err)
		}
		cfg, err := png.DecodeConfig(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("/tmp/x.png is not a PNG: %v", err)
		}
		if got, want := [2]int{cfg.Width, cfg.Height}, [2]int{640, 480}; got != want {
			t.Errorf("PNG size = %v, want %v (matplotlib's default figure)", got, want)
		}
		if _, err := png.Decode(bytes.NewReader(data)); err != nil {
			t.Errorf("PNG does not decode: %v", err)
		}
	})
	t.Run("no scipy", func(t *testing.T) {
		_, stderr, code := runSandboxed(t, eng, img.ID, VenvPython, "-c", "import scipy")
		if want := "ModuleNotFoundError: No module named 'scipy'"; code == 0 || !strings.Contains(stderr, want) {
			t.Errorf("import scipy: exit %d, stderr %q; want a failure with %q", code, stderr, want)
		}
	})
}

// runSandboxed runs argv in image with the sandbox's profile: user 10001,
// read-only root, a tmpfs /tmp holding HOME and MPLCONFIGDIR, no network,
// no capabilities. A program failing is an exit code, not a test failure.
func runSandboxed(t *testing.T, eng *engine.Client, image string, argv ...string) (stdout, stderr string, code int) {
	t.Helper()
	host := &container.HostConfig{
		NetworkMode: "none", ReadonlyRootfs: true,
		CapDrop: []string{"ALL"}, SecurityOpt: []string{"no-new-privileges"},
		Tmpfs: map[string]string{"/tmp": "rw,nosuid,nodev,size=256m,mode=1777"},
	}
	var out, errOut bytes.Buffer
	exit, err := eng.Run(t.Context(), engine.Spec{
		Config: &container.Config{
			Image: image, User: SandboxUser, Cmd: argv, NetworkDisabled: true,
			Env: []string{"HOME=/tmp", "MPLCONFIGDIR=/tmp/matplotlib"},
		},
		Host: host, Stdout: &out, Stderr: &errOut, Timeout: 2 * time.Minute,
	})
	if err != nil {
		t.Fatalf("run in %s: %v", image, err)
	}
	return out.String(), errOut.String(), exit.Code
}
