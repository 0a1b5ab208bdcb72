package images

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/google/go-cmp/cmp"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/pybox-dev/pybox/internal/engine"
)

// layoutCheck prints, as JSON, what the sandbox relies on inside the image.
const layoutCheck = `
import json, os, stat, sys
bad = []
for top in ("/usr", "/bin", "/sbin"):
    for d, _, files in os.walk(top):
        for f in files:
            st = os.lstat(os.path.join(d, f))
            if stat.S_ISREG(st.st_mode) and st.st_mode & (stat.S_ISUID | stat.S_ISGID):
                bad.append(os.path.join(d, f))
out = {
    "uid": os.getuid(), "gid": os.getgid(), "prefix": sys.prefix, "cwd": os.getcwd(),
    "home": os.path.expanduser("~"),
    "runner_baked": os.path.exists("/opt/pybox/runner.py"),
    "setuid": bad, "installer": open("/opt/pybox/installer").read().strip(),
    "venv_writable": os.access("/opt/venv/bin", os.W_OK),
}
if out["installer"] == "pip":
    import pip
    out["pip_in_venv"] = pip.__file__.startswith("/opt/venv/")
print(json.dumps(out))
`

type layout struct {
	UID          int      `json:"uid"`
	GID          int      `json:"gid"`
	Prefix       string   `json:"prefix"`
	Cwd          string   `json:"cwd"`
	Home         string   `json:"home"`
	RunnerBaked  bool     `json:"runner_baked"`
	Setuid       []string `json:"setuid"`
	Installer    string   `json:"installer"`
	VenvWritable bool     `json:"venv_writable"`
	PipInVenv    bool     `json:"pip_in_venv"`
}

func TestEnsureBase(t *testing.T) {
	eng := requireDocker(t)
	b, lines := testBuilder(t, eng)

	// Two concurrent callers share one build (when a build is needed at all).
	start := time.Now()
	imgs := make([]engine.Image, 2)
	var wg sync.WaitGroup
	for i := range imgs {
		wg.Go(func() {
			img, err := b.Ensure(t.Context(), "base")
			if err != nil {
				t.Errorf("Ensure(base): %v", err)
			}
			imgs[i] = img
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("first Ensure(base): %s", time.Since(start).Round(time.Second))
	if imgs[0].ID == "" || imgs[0].ID != imgs[1].ID {
		t.Fatalf("concurrent Ensure returned images %q and %q", imgs[0].ID, imgs[1].ID)
	}
	if n := lines.count("pybox: building " + Tag("base")); n > 1 {
		t.Errorf("runtime image built %d times, want at most once", n)
	}

	again, err := b.Ensure(t.Context(), "")
	if err != nil {
		t.Fatalf("second Ensure: %v", err)
	}
	if again.ID != imgs[0].ID {
		t.Errorf("second Ensure returned %s, want the same image %s", again.ID, imgs[0].ID)
	}
	checkImageConfig(t, again, "base")
	checkLayout(t, eng, again)
	checkRunner(t, eng)
}

func checkImageConfig(t *testing.T, img engine.Image, variant string) {
	t.Helper()
	l := img.Labels
	mode := l[LabelMode]
	if l[LabelDigest] != digest(variant, mode) {
		t.Errorf("digest label = %q, want the current %s digest", l[LabelDigest], mode)
	}
	wantInstaller := map[string]string{modeOnline: "uv", modeOffline: "pip"}[mode]
	if l[LabelInstaller] != wantInstaller || l[LabelVariant] != variant {
		t.Errorf("labels installer=%q variant=%q, want %q %q", l[LabelInstaller], l[LabelVariant], wantInstaller, variant)
	}
	if l[ocispec.AnnotationTitle] != "pybox runtime" || l[ocispec.AnnotationVersion] != variant ||
		l[ocispec.AnnotationBaseImageName] == "" {
		t.Errorf("OCI labels missing or wrong: %v", l)
	}
	if _, err := time.Parse(time.RFC3339, l[ocispec.AnnotationCreated]); err != nil {
		t.Errorf("created label: %v", err)
	}
	for _, kv := range []string{"PATH=" + envPath, "VIRTUAL_ENV=/opt/venv", "PYTHONDONTWRITEBYTECODE=1",
		"PYTHONUNBUFFERED=1", "MPLBACKEND=Agg", "LANG=C.UTF-8"} {
		if !slices.Contains(img.Env, kv) {
			t.Errorf("image env lacks %s: %v", kv, img.Env)
		}
	}
}

func checkLayout(t *testing.T, eng *engine.Client, img engine.Image) {
	t.Helper()
	out := sandboxRun(t, eng, img.ID, nil, nil, VenvPython, "-c", layoutCheck)
	var got layout
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("layout output %q: %v", out, err)
	}
	want := layout{
		UID: 10001, GID: 10001, Prefix: "/opt/venv", Cwd: Workdir, Home: "/home/pybox",
		RunnerBaked: false, Setuid: []string{}, Installer: img.Labels[LabelInstaller],
		PipInVenv: img.Labels[LabelInstaller] == "pip",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("inside the image (-want +got):\n%s", diff)
	}
}

// checkRunner runs a program through the runner as the sandbox does: the
// runner is PID 1 (the shell execs it), takes one framed request on stdin
// and answers in frames.
func checkRunner(t *testing.T, eng *engine.Client) {
	t.Helper()
	prog := "import sys; print('argv', sys.argv); print(6 * 7)"
	req := `{"nonce": "n1", "file": "/tmp/p.py", "stdin": null}`
	out := sandboxRun(t, eng, Tag("base"), nil, nil, "/bin/sh", "-c",
		// stdin stays open after the request: the runner ends at once when it closes (pybox gone)
		// the runner first (the bootstrap reads it), then the greeting and the request
		`printf '%s\n' "$1" > /tmp/p.py && printf '%s\n%d\n%s' "$7" "${#3}" "$3" > /tmp/req && mkfifo /tmp/in || exit 1; { cat /tmp/req; sleep 60; } > /tmp/in & exec `+VenvPython+` "$4" "$5" "$6" "$2" once < /tmp/in`,
		"sh", prog, RunnerArgs()[3], req, RunnerArgs()[0], RunnerArgs()[1], RunnerArgs()[2], string(RunnerFrame(false)))
	got, err := unframe(out)
	want := []string{"ready - ", "out n1 argv ['/tmp/p.py']\n42\n", `done n1 {"code": 0, "dropped": 0}`}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("runner output %q = %q, %v; want %q", out, got, err, want)
	}
}

// unframe decodes "PYBOX <nonce> <kind> <len>\n<payload>" frames into
// "<kind> <nonce> <payload>", joining consecutive frames of one kind and
// nonce (output may come in any number of frames).
func unframe(s string) ([]string, error) {
	var out []string
	last := ""
	for s != "" {
		var nonce, kind string
		var n int
		head, rest, ok := strings.Cut(s, "\n")
		if _, err := fmt.Sscanf(head, "PYBOX %s %s %d", &nonce, &kind, &n); !ok || err != nil || n > len(rest) {
			return out, fmt.Errorf("bad frame at %.40q", s)
		}
		if key := kind + " " + nonce + " "; key == last {
			out[len(out)-1] += rest[:n]
		} else {
			out, last = append(out, key+rest[:n]), key
		}
		s = rest[n:]
	}
	return out, nil
}

// TestOnlineBuild builds online. Without a registry (this project's CI) it
// must fail at once, say what to do, and leave the runtime image alone.
func TestOnlineBuild(t *testing.T) {
	eng := requireDocker(t)
	b := freshBuilder(t, eng)
	before, hadBefore, err := eng.InspectImage(t.Context(), Tag("base"))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	img, err := b.Build(t.Context(), BuildOptions{Variant: "base"})
	if err == nil {
		t.Logf("online build succeeded in %s", time.Since(start).Round(time.Second))
		checkImageConfig(t, img, "base")
		checkLayout(t, eng, img)
		return
	}
	t.Logf("online build failed in %s: %v", time.Since(start), err)
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("online build took %s to fail, want fast", d)
	}
	if !strings.Contains(err.Error(), "pybox image build --offline") {
		t.Errorf("error %q does not point to the offline build", err)
	}
	after, hasAfter, err := eng.InspectImage(t.Context(), Tag("base"))
	if err != nil {
		t.Fatal(err)
	}
	if hasAfter != hadBefore || after.ID != before.ID {
		t.Errorf("failed online build changed %s: %q -> %q", Tag("base"), before.ID, after.ID)
	}
}

// TestEnsureDatascience is slow (a debootstrap with numpy, pandas and
// matplotlib): it runs only with PYBOX_TEST_DATASCIENCE=1.
func TestEnsureDatascience(t *testing.T) {
	if os.Getenv("PYBOX_TEST_DATASCIENCE") != "1" {
		t.Skip("set PYBOX_TEST_DATASCIENCE=1 to build and test the datascience image")
	}
	eng := requireDocker(t)
	b, _ := testBuilder(t, eng)
	start := time.Now()
	img, err := b.Ensure(t.Context(), "datascience")
	if err != nil {
		t.Fatalf("Ensure(datascience): %v", err)
	}
	t.Logf("Ensure(datascience): %s, image %s, %d MB", time.Since(start).Round(time.Second), img.ID, img.Size>>20)
	checkImageConfig(t, img, "datascience")
	checkLayout(t, eng, img)

	// As the sandbox runs it: read-only root, a tmpfs /tmp, HOME there.
	host := &container.HostConfig{ReadonlyRootfs: true, Tmpfs: map[string]string{"/tmp": "size=64m"}}
	env := []string{"HOME=/tmp", "MPLCONFIGDIR=/tmp"}
	prog := `
import os, numpy as np, pandas as pd, matplotlib
import matplotlib.pyplot as plt
df = pd.DataFrame({"x": np.arange(5), "y": np.arange(5) ** 2})
plt.plot(df.x, df.y)
plt.savefig("/tmp/f.png")
print(matplotlib.get_backend(), int(df.y.sum()), os.path.getsize("/tmp/f.png") > 1000)
`
	out := sandboxRun(t, eng, img.ID, host, env, VenvPython, "-c", prog)
	if want := "agg 30 true\n"; strings.ToLower(out) != want {
		t.Errorf("datascience output = %q, want %q", out, want)
	}
}
