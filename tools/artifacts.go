package tools

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/internal/storage"
	"github.com/pybox-dev/pybox/sandbox"
)

// Caps on what comes back with a result.
const (
	maxArtifacts     = 100     // files listed
	maxOutputEntries = 20_000  // entries of the run's folder looked at, at most
	maxFigures       = 8       // images attached
	maxFigureBytes   = 2 << 20 // per image
	maxFiguresTotal  = 8 << 20 // all images of one result
)

var pngMagic = []byte("\x89PNG\r\n\x1a\n")

// Artifact is a file the program wrote in its output folder.
type Artifact struct {
	Path  string `json:"path" jsonschema:"path in the workspace (code storage, or the session's folder)"`
	Bytes int64  `json:"bytes"`
}

// outputs is one run's own output folder (outputs/<name> in its
// workspace, $PYBOX_OUTPUTS in the program): the only place its figures
// and files are collected from, and one no other run can write.
type outputs struct {
	own   *storage.Dir // the folder
	rel   string       // its path in the workspace
	shown *storage.Dir // the workspace, where the model finds the files
	keep  bool         // copy the files from own into shown (own is a private copy)
	done  func()       // releases own and whatever it belongs to
}

// runOutputs wraps a stateless run's private output folder; its files are
// copied into code storage at outputs/<name> when collected.
func (h *handlers) runOutputs(ctx context.Context, o *sandbox.Outputs) *outputs {
	if o == nil {
		return nil
	}
	own, err := storage.Open(o.Dir)
	if err != nil {
		h.cfg.Log.WarnContext(ctx, "run output folder unreadable", "err", err)
		o.Remove()
		return nil
	}
	release := func() {
		own.Close()
		if err := o.Remove(); err != nil {
			h.cfg.Log.WarnContext(ctx, "run output folder not removed", "err", err)
		}
	}
	return &outputs{own: own, rel: path.Join(sandbox.OutputsFolder, o.Name), shown: h.cfg.Storage, keep: true, done: release}
}

// newSessionOutputs makes outputs/<name> in a session's workspace (which
// only that session's container mounts) and takes ownership of ws.
func newSessionOutputs(ws *storage.Dir) (*outputs, error) {
	rel := path.Join(sandbox.OutputsFolder, time.Now().UTC().Format("20060102-150405")+"-"+newID())
	own, err := ws.Sub(rel)
	if err != nil {
		ws.Close()
		return nil, err
	}
	return &outputs{own: own, rel: rel, shown: ws, done: func() { own.Close(); ws.RemoveEmpty(rel); ws.Close() }}, nil
}

// folder is the run's output folder in its workspace; "" without one.
func (o *outputs) folder() string {
	if o == nil {
		return ""
	}
	return o.rel
}

func (o *outputs) close() {
	if o != nil {
		o.done()
	}
}

// collect lists the files in the run's folder, copies them into the
// workspace when the folder is a private copy, and returns its figures
// as image content. A nil o collects nothing.
func (o *outputs) collect() ([]Artifact, []mcp.Content, string) {
	if o == nil {
		return nil, nil, ""
	}
	files, more := o.files()
	var arts []Artifact
	var imgs []mcp.Content
	var skipped, lost []string
	total := 0
	for _, f := range files {
		a := Artifact{Path: path.Join(o.rel, f.Path), Bytes: f.Bytes}
		if o.keep {
			if err := o.shown.CopyFrom(a.Path, o.own, f.Path); err != nil {
				lost = append(lost, a.Path)
				continue
			}
		}
		arts = append(arts, a)
		if !isFigure(f.Path) {
			continue
		}
		data, cut, err := o.own.Read(f.Path, maxFigureBytes)
		switch {
		case err != nil || cut || !bytes.HasPrefix(data, pngMagic):
			skipped = append(skipped, a.Path)
		case len(imgs) >= maxFigures || total+len(data) > maxFiguresTotal:
			skipped = append(skipped, a.Path)
		default:
			imgs = append(imgs, &mcp.ImageContent{Data: data, MIMEType: "image/png"})
			total += len(data)
		}
	}
	return arts, imgs, artifactNote(more, skipped, lost)
}

func isFigure(p string) bool {
	return !strings.Contains(p, "/") && strings.HasPrefix(p, "figure-") && strings.HasSuffix(p, ".png")
}

// files lists the folder's regular files (paths relative to it), at most
// maxArtifacts of them after looking at maxOutputEntries entries, reading
// directories in batches: a run that left a huge tree costs a bounded walk.
func (o *outputs) files() ([]Artifact, bool) {
	found, more := o.own.Files(maxArtifacts, maxOutputEntries)
	arts := make([]Artifact, len(found))
	for i, f := range found {
		arts[i] = Artifact{Path: f.Path, Bytes: f.Bytes}
	}
	return arts, more
}

func artifactNote(more bool, skipped, lost []string) string {
	var b strings.Builder
	if more {
		b.WriteString("(the output folder holds more than pybox lists; only the first files found are shown)\n")
	}
	if len(skipped) > 0 {
		fmt.Fprintf(&b, "(figures not attached because of the size or count caps, but saved: %s)\n", strings.Join(skipped, ", "))
	}
	if len(lost) > 0 {
		fmt.Fprintf(&b, "(output files that could not be saved in the workspace: %s)\n", strings.Join(lost, ", "))
	}
	return b.String()
}
