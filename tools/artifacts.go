package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

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

// outputs is one run's own output folder ($PYBOX_OUTPUTS in the
// program), a private folder no other run can write: the only place its
// figures and files are collected from. They are copied into its
// workspace, at outputs/<name>.
type outputs struct {
	own   *storage.Dir // the private folder
	rel   string       // where its files go in the workspace
	shown *storage.Dir // the workspace, where the model finds the files
	// account counts what is copied into shown against its quota
	account func() account
	done    func() // releases own and whatever it belongs to
}

// runOutputs wraps a run's private output folder (a stateless run's or a
// session call's), whose files are copied into the workspace shown when
// collected; closing it removes the folder and then calls after (nil: none).
func (h *handlers) runOutputs(ctx context.Context, o *sandbox.Outputs, shown *storage.Dir, after func()) *outputs {
	if o == nil {
		if after != nil {
			after()
		}
		return nil
	}
	own, err := storage.Open(o.Dir)
	if err != nil {
		h.cfg.Log.WarnContext(ctx, "run output folder unreadable", "err", err)
		o.Remove()
		if after != nil {
			after()
		}
		return nil
	}
	release := func() {
		own.Close()
		if err := o.Remove(); err != nil {
			h.cfg.Log.WarnContext(ctx, "run output folder not removed", "err", err)
		}
		if after != nil {
			after()
		}
	}
	return &outputs{own: own, rel: path.Join(sandbox.OutputsFolder, o.Name), shown: shown, done: release,
		account: func() account { return h.charge(shown) }}
}

// account counts what a copy-back writes into a workspace (a
// sandbox.Charge).
type account interface {
	Take(bytes, entries int64) error
	Close()
}

// charge opens the account of a copy-back into ws: the sandbox's, which
// bounds it by the workspace's quota and the disk reserve.
func (h *handlers) charge(ws *storage.Dir) account {
	if h.cfg.Sandbox == nil { // handler unit tests without a sandbox
		return unbounded{}
	}
	return h.cfg.Sandbox.Charge(ws.Path())
}

// unbounded counts nothing.
type unbounded struct{}

func (unbounded) Take(int64, int64) error { return nil }
func (unbounded) Close()                  {}

func (o *outputs) close() {
	if o != nil {
		o.done()
	}
}

// collected is what a run's output folder gave its result.
type collected struct {
	arts     []Artifact    // listed (and saved in the workspace)
	notSaved []Artifact    // found but not saved: they are gone
	figures  []mcp.Content // PNG figures attached
	note     string
}

// collect lists the files in the run's folder, copies them into the
// workspace when the folder is a private copy (each counted against the
// workspace's quota and the disk reserve as it is written), and returns
// its figures as image content. A nil o collects nothing.
func (o *outputs) collect() collected {
	var c collected
	if o == nil {
		return c
	}
	files, more := o.files()
	acct := o.account()
	defer acct.Close()
	made := map[string]bool{} // folders counted
	var skipped []string
	refused := map[string][]string{} // why -> files
	total := 0
	for _, f := range files {
		a := Artifact{Path: path.Join(o.rel, f.Path), Bytes: f.Bytes}
		if err := o.shown.CopyFrom(a.Path, o.own, f.Path, func(size int64) error { return acct.Take(size, entries(a.Path, made)) }); err != nil {
			why := notSavedReason(err)
			refused[why] = append(refused[why], a.Path)
			c.notSaved = append(c.notSaved, a)
			continue
		}
		c.arts = append(c.arts, a)
		if !isFigure(f.Path) {
			continue
		}
		data, cut, err := o.own.Read(f.Path, maxFigureBytes)
		switch {
		case err != nil || cut || !bytes.HasPrefix(data, pngMagic):
			skipped = append(skipped, a.Path)
		case len(c.figures) >= maxFigures || total+len(data) > maxFiguresTotal:
			skipped = append(skipped, a.Path)
		default:
			c.figures = append(c.figures, &mcp.ImageContent{Data: data, MIMEType: "image/png"})
			total += len(data)
		}
	}
	c.note = artifactNote(more, skipped, refused)
	return c
}

// entries is what saving rel adds to the workspace: the file and the
// folders above it not counted yet (marked in made).
func entries(rel string, made map[string]bool) int64 {
	n := int64(1)
	for d := path.Dir(rel); d != "." && d != "/" && !made[d]; d = path.Dir(d) {
		made[d] = true
		n++
	}
	return n
}

// notSavedReason says why a file was not saved, for the model.
func notSavedReason(err error) string {
	switch {
	case errors.Is(err, sandbox.ErrQuota):
		return "the workspace's storage quota or the host's disk reserve would have been passed"
	case errors.Is(err, storage.ErrTooLarge):
		return "the file grew while it was saved"
	}
	return "the file could not be read or written"
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

func artifactNote(more bool, skipped []string, refused map[string][]string) string {
	var b strings.Builder
	if more {
		b.WriteString("(the output folder holds more than pybox lists; only the first files found are shown)\n")
	}
	if len(skipped) > 0 {
		fmt.Fprintf(&b, "(figures not attached because of the size or count caps, but saved: %s)\n", strings.Join(skipped, ", "))
	}
	for _, why := range slices.Sorted(maps.Keys(refused)) {
		fmt.Fprintf(&b, "(output files not saved in the workspace, and gone, because %s: %s)\n", why, strings.Join(refused[why], ", "))
	}
	return b.String()
}
