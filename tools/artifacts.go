package tools

import (
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/internal/storage"
)

// outputsDir is the workspace folder for files a program produces; each
// run's figures go into outputs/<run id>/.
const outputsDir = "outputs"

// Caps on what comes back with a result.
const (
	maxArtifacts     = 100     // files listed
	maxOutputEntries = 20_000  // entries of outputs/ looked at, at most
	maxFigures       = 8       // images attached
	maxFigureBytes   = 2 << 20 // per image
	maxFiguresTotal  = 8 << 20 // all images of one result
)

var pngMagic = []byte("\x89PNG\r\n\x1a\n")

// Artifact is a file the program wrote under the outputs folder.
type Artifact struct {
	Path  string `json:"path" jsonschema:"path in the workspace (code storage)"`
	Bytes int64  `json:"bytes"`
}

// outputs is one run's output folder.
type outputs struct {
	ws    *storage.Dir
	run   string // outputs/<run id>, relative to ws
	since time.Time
}

// newOutputs creates outputs/<run id> in ws for the program's figures.
func newOutputs(ws *storage.Dir) (*outputs, error) {
	run := path.Join(outputsDir, time.Now().UTC().Format("20060102-150405")+"-"+newID())
	sub, err := ws.Sub(run)
	if err != nil {
		return nil, err
	}
	sub.Close()
	return &outputs{ws: ws, run: run, since: time.Now().Add(-time.Second)}, nil
}

// folder is the run's output folder for the sandbox; "" without one.
func (o *outputs) folder() string {
	if o == nil {
		return ""
	}
	return o.run
}

// collect lists the files written under outputs/ during the run and
// returns the run's figures as image content. A nil o (no usable outputs
// folder) collects nothing and says why.
func (o *outputs) collect() ([]Artifact, []mcp.Content, string) {
	if o == nil {
		return nil, nil, "(figures and output files were not collected: outputs/ in the workspace is not a folder)\n"
	}
	defer o.ws.RemoveEmpty(o.run)
	arts, more := o.written()
	var imgs []mcp.Content
	var skipped []string
	total := 0
	for _, a := range arts {
		if !strings.HasPrefix(a.Path, o.run+"/figure-") || !strings.HasSuffix(a.Path, ".png") {
			continue
		}
		data, cut, err := o.ws.Read(a.Path, maxFigureBytes)
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
	return arts, imgs, artifactNote(more, skipped)
}

// runFolder matches the name of a run's own folder under outputs/.
var runFolder = regexp.MustCompile(`^[0-9]{8}-[0-9]{6}-[0-9a-f]{8}$`)

// written walks outputs/ for regular files modified since the run began.
// Other runs' folders (concurrent or earlier ones) are skipped unread.
func (o *outputs) written() ([]Artifact, bool) {
	var arts []Artifact
	more := false
	visited := 0
	walkErr := fs.WalkDir(o.ws.FS(), outputsDir, func(p string, d fs.DirEntry, err error) error {
		if visited++; visited > maxOutputEntries { // a program made a huge tree: list what we saw
			more = true
			return fs.SkipAll
		}
		if err == nil && d.IsDir() && path.Dir(p) == outputsDir && p != o.run && runFolder.MatchString(d.Name()) {
			return fs.SkipDir
		}
		if err != nil || !d.Type().IsRegular() || strings.Contains(p, "/.pybox-tmp-") {
			return nil // unreadable entries, directories, symlinks and our temp files are skipped
		}
		fi, err := d.Info()
		if err != nil || fi.ModTime().Before(o.since) {
			return nil
		}
		if len(arts) >= maxArtifacts {
			more = true
			return fs.SkipAll
		}
		arts = append(arts, Artifact{Path: p, Bytes: fi.Size()})
		return nil
	})
	_ = walkErr // a missing outputs folder simply means no artifacts
	sort.Slice(arts, func(i, j int) bool { return arts[i].Path < arts[j].Path })
	return arts, more
}

func artifactNote(more bool, skipped []string) string {
	var b strings.Builder
	if more {
		b.WriteString("(outputs/ holds more than pybox lists; only the first files found are shown)\n")
	}
	if len(skipped) > 0 {
		fmt.Fprintf(&b, "(figures not attached because of the size or count caps, but saved: %s)\n", strings.Join(skipped, ", "))
	}
	return b.String()
}
