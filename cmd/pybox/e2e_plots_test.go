//go:build !windows

package main

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/internal/testenv"
	"github.com/pybox-dev/pybox/tools"
)

// dataServer starts a server on the datascience variant. Its runs may take
// 120 s (not the default 30): importing matplotlib,
// numpy and pandas and rendering a dozen figures on one CPU's quota took
// over 30 s on this 2-core machine while the other tests ran.
func dataServer(t *testing.T, env ...string) *server {
	t.Helper()
	testenv.RuntimeImage(t, testenv.Docker(t), "datascience")
	return startServer(t, append([]string{"PYBOX_VARIANT=datascience", "PYBOX_TIMEOUT=120s"}, env...)...)
}

// pngs decodes every image content of a result, failing on anything that
// is not a valid PNG.
func pngs(t *testing.T, res *mcp.CallToolResult) int {
	t.Helper()
	n := 0
	for _, c := range res.Content {
		img, ok := c.(*mcp.ImageContent)
		if !ok {
			continue
		}
		cfg, err := png.DecodeConfig(bytes.NewReader(img.Data))
		if img.MIMEType != "image/png" || err != nil || cfg.Width < 100 || cfg.Height < 100 {
			t.Errorf("image content %s: %v (%dx%d); want a real PNG figure", img.MIMEType, err, cfg.Width, cfg.Height)
		}
		n++
	}
	return n
}

// TestFiguresComeBackAsImages: open and shown figures return as PNG image
// content, are saved in the run's output folder ($PYBOX_OUTPUTS, kept in
// code storage as outputs/<run>/), and files written there are listed;
// files written elsewhere under outputs/ are shared, and not listed.
func TestFiguresComeBackAsImages(t *testing.T) {
	parallelTest(t)
	s := dataServer(t)
	code := "import matplotlib.pyplot as plt, numpy as np, pandas as pd\n" +
		"plt.plot(np.arange(10) ** 2)\nplt.show()\n" + // shown
		"plt.figure(); plt.bar(['a', 'b'], [1, 2])\n" + // left open
		"import os\nout = os.environ['PYBOX_OUTPUTS']\n" +
		"pd.DataFrame({'x': [1, 2]}).to_csv(os.path.join(out, 'table.csv'), index=False)\n" +
		"open('outputs/shared.txt', 'w').write('shared')\nprint('done')\n"
	res := s.call("execute_code", map[string]any{"code": code})
	out := decode[tools.ExecutionOutput](t, res)
	if res.IsError || out.ExitCode != 0 || out.Stdout != "done\n" {
		t.Fatalf("run failed: %s", text(res))
	}
	if n := pngs(t, res); n != 2 || out.Figures != 2 {
		t.Errorf("got %d images (figures=%d); want 2", n, out.Figures)
	}
	var csv, figs int
	for _, a := range out.Artifacts {
		switch {
		case strings.HasPrefix(a.Path, "outputs/") && strings.HasSuffix(a.Path, "/table.csv") && a.Bytes == int64(len("x\n1\n2\n")):
			if b, err := os.ReadFile(filepath.Join(s.storage, a.Path)); err != nil || string(b) != "x\n1\n2\n" {
				t.Errorf("%s not kept in code storage: %q %v", a.Path, b, err)
			}
			csv++
		case strings.HasSuffix(a.Path, ".png"):
			if _, err := os.Stat(filepath.Join(s.storage, a.Path)); err != nil {
				t.Errorf("figure %s not saved in code storage: %v", a.Path, err)
			}
			figs++
		}
	}
	if csv != 1 || figs != 2 || len(out.Artifacts) != 3 {
		t.Errorf("artifacts %+v; want outputs/<run>/table.csv and two saved figures, nothing else", out.Artifacts)
	}
	if !strings.Contains(text(res), "table.csv") {
		t.Errorf("the text does not list the output files: %s", text(res))
	}
}

// TestFigureCapsAndSessions: at most 8 figures come back; figures work in a
// session too; a program without figures returns no image.
func TestFigureCapsAndSessions(t *testing.T) {
	parallelTest(t)
	s := dataServer(t)
	many := "import matplotlib.pyplot as plt\nfor i in range(12):\n    plt.figure(); plt.plot([0, i])\n"
	if n := pngs(t, s.call("execute_code", map[string]any{"code": many})); n != 8 {
		t.Errorf("12 figures gave %d images; want the cap of 8", n)
	}
	s.sessionRun("plots", "import matplotlib.pyplot as plt\ndata = [3, 1, 2]")
	res := s.call("execute_code", map[string]any{"code": "plt.plot(data)", "session_id": "plots"})
	if n := pngs(t, res); n != 1 {
		t.Errorf("session figure: %d images; want 1 (%s)", n, text(res))
	}
	if n := pngs(t, s.call("execute_code", map[string]any{"code": "print(1)", "session_id": "plots"})); n != 0 {
		t.Errorf("a session call without a new figure returned %d images", n)
	}
}
