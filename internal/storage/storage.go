package storage

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"
)

// Sentinel errors callers branch on.
var (
	ErrOutside  = errors.New("path is outside the code storage directory")
	ErrNotFound = errors.New("file not found")
	ErrNotFile  = errors.New("not a regular file")
	ErrTooLarge = errors.New("file is too large")
	ErrBadName  = errors.New("invalid file name")
)

// Dir is an opened code-storage directory.
type Dir struct {
	path string
	root *os.Root

	appendMu appendMutex // serializes Append (append.go)
	owner    *[2]int     // uid, gid given to directories Sub creates (sub.go)
	shared   bool        // the group shares it: group-writable, setgid directories (share.go)
}

// Open creates (if needed) and opens the directory at path.
func Open(path string) (*Dir, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("code storage path: %w", err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("create code storage: %w", err)
	}
	// The real path, resolved once: containers mount it, and a mount
	// source must not have a symlink on its path.
	if abs, err = filepath.EvalSymlinks(abs); err != nil {
		return nil, fmt.Errorf("code storage path: %w", err)
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("open code storage: %w", err)
	}
	return &Dir{path: abs, root: root}, nil
}

// Path is the absolute host path of the directory.
func (d *Dir) Path() string { return d.path }

// Close releases the directory handle.
func (d *Dir) Close() error { return d.root.Close() }

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// NewCodeName returns "<base>_<random>.py" for a requested file name (which
// may be empty): directories and the .py suffix are dropped and unsafe
// characters replaced, as the mcp_code_executor naming does.
func NewCodeName(requested string) string {
	base := strings.TrimSuffix(filepath.Base(strings.TrimSpace(requested)), ".py")
	base = strings.Trim(unsafeName.ReplaceAllString(base, "_"), "._")
	if base == "" || base == "." {
		base = "code"
	}
	if len(base) > 64 {
		base = base[:64]
	}
	return base + "_" + randomHex(4) + ".py"
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux (documented)
	return hex.EncodeToString(b)
}

// Rel turns a caller's path (relative to the root, or absolute under it)
// into a clean relative path, refusing anything that leaves the root.
func (d *Dir) Rel(p string) (string, error) {
	if err := checkName(p); err != nil {
		return "", err
	}
	if filepath.IsAbs(p) {
		r, err := filepath.Rel(d.path, filepath.Clean(p))
		if err != nil || !filepath.IsLocal(r) {
			return "", fmt.Errorf("%w: %s", ErrOutside, p)
		}
		return checkDepth(r)
	}
	if !filepath.IsLocal(p) {
		return "", fmt.Errorf("%w: %s", ErrOutside, p)
	}
	return checkDepth(filepath.Clean(p))
}

// Caps on the paths callers pass.
const (
	MaxPathBytes = 4096 // bytes of a whole path
	MaxPathDepth = 64   // folders and file along it
)

// checkName refuses what no caller should pass as a path: empty, longer
// than MaxPathBytes, deeper than MaxPathDepth, invalid UTF-8, or with a
// control character (a newline would break listings and logs).
func checkName(p string) error {
	switch {
	case strings.TrimSpace(p) == "":
		return fmt.Errorf("%w: an empty path", ErrBadName)
	case len(p) > MaxPathBytes:
		return fmt.Errorf("%w: the path is %d bytes long; the limit is %d", ErrBadName, len(p), MaxPathBytes)
	case !utf8.ValidString(p) || strings.ContainsRune(p, utf8.RuneError):
		// U+FFFD is what JSON decoding makes of bytes that were not UTF-8.
		return fmt.Errorf("%w: %.80q is not valid UTF-8", ErrBadName, p)
	case strings.ContainsFunc(p, unicode.IsControl):
		return fmt.Errorf("%w: %.80q has a control character (such as a newline)", ErrBadName, p)
	}
	return nil
}

// checkDepth refuses a relative path deeper than MaxPathDepth.
func checkDepth(rel string) (string, error) {
	if strings.Count(filepath.ToSlash(rel), "/") >= MaxPathDepth {
		return "", fmt.Errorf("%w: the path is more than %d levels deep", ErrBadName, MaxPathDepth)
	}
	return rel, nil
}

// Abs is the host path of rel (already validated by Rel).
func (d *Dir) Abs(rel string) string { return filepath.Join(d.path, rel) }

// Create writes content to rel atomically; it fails if rel exists.
func (d *Dir) Create(rel string, content []byte) error {
	p, err := d.place(rel, true)
	if err != nil {
		return err
	}
	defer p.close()
	if _, err := p.dir.Lstat(p.name); err == nil {
		return fmt.Errorf("create %s: %w", rel, fs.ErrExist)
	}
	return d.writeIn(p, bytes.NewReader(content))
}

// place is where rel lives: an open handle on its folder, and its name
// there. Everything done through a place happens in that one folder,
// whatever a program does to the path meanwhile (renames a folder on it,
// swaps one for a symlink): a write lands in the folder that was checked,
// and its temp file can always be removed.
type place struct {
	dir  *os.Root
	name string
	rel  string
	own  bool // dir is this place's to close
}

// place opens rel's folder (creating it and its parents when create).
func (d *Dir) place(rel string, create bool) (*place, error) {
	parent, name := filepath.Split(rel)
	parent = filepath.Clean(parent)
	if parent == "." {
		return &place{dir: d.root, name: name, rel: rel}, nil
	}
	if create {
		if err := d.mkdirAll(parent); err != nil {
			return nil, d.wrap("create directory", parent, err)
		}
	}
	dir, err := d.root.OpenRoot(parent)
	if err != nil {
		return nil, d.wrap("open directory", parent, err)
	}
	return &place{dir: dir, name: name, rel: rel, own: true}, nil
}

func (p *place) close() {
	if p.own {
		p.dir.Close()
	}
}

// Write replaces rel with content atomically (temp file + rename), creating
// parent directories inside the root as needed.
func (d *Dir) Write(rel string, content []byte) error {
	return d.writeFrom(rel, bytes.NewReader(content))
}

// CopyFrom copies the regular file srcRel of src to rel in d, as Write
// does (atomically, parents created), without following symlinks in src.
// It first calls take with the size of the opened file (its apparent size:
// a sparse file counts in full, as its copy is dense); an error from take
// ends the copy before anything is written. The copy writes at most that
// size: a file that grew meanwhile fails with ErrTooLarge. A copy that
// fails leaves nothing at rel.
func (d *Dir) CopyFrom(rel string, src *Dir, srcRel string, take func(size int64) error) error {
	f, fi, err := src.openRegular(srcRel)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := take(fi.Size()); err != nil {
		return err
	}
	return d.writeFrom(rel, &limitReader{r: f, left: fi.Size(), rel: srcRel})
}

// limitReader reads r to its end, failing with ErrTooLarge once it has
// given more than left bytes.
type limitReader struct {
	r    io.Reader
	left int64
	rel  string
}

func (l *limitReader) Read(p []byte) (int, error) {
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1] // one byte more shows that the file grew
	}
	n, err := l.r.Read(p)
	if l.left -= int64(n); l.left < 0 {
		return 0, fmt.Errorf("%s grew while it was copied: %w", l.rel, ErrTooLarge)
	}
	return n, err
}

// writeFrom replaces rel with what r holds (temp file + rename).
func (d *Dir) writeFrom(rel string, r io.Reader) error {
	p, err := d.place(rel, true)
	if err != nil {
		return err
	}
	defer p.close()
	return d.writeIn(p, r)
}

// writeIn replaces p's file with what r holds: a temp file in p's folder,
// renamed over it there.
func (d *Dir) writeIn(p *place, r io.Reader) error {
	if err := d.refuseSpecialIn(p); err != nil {
		return err
	}
	tmp := tempPrefix + randomHex(6)
	f, err := p.dir.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|oNoFollow, 0o644)
	if err != nil {
		return d.wrap("write", p.rel, err)
	}
	_, werr := io.Copy(f, r)
	merr := d.finishMode(f)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, merr, serr, cerr); err != nil {
		_ = p.dir.Remove(tmp) // best effort: the temp file is ours and useless now
		return d.wrap("write", p.rel, err)
	}
	if err := p.dir.Rename(tmp, p.name); err != nil {
		_ = p.dir.Remove(tmp) // in the same folder: it goes
		return d.wrap("write", p.rel, err)
	}
	return nil
}

// finishMode makes a new file readable by the sandbox whatever the
// server's umask, and gives it the sandbox owner when one is set (so
// programs can also append to files the tools wrote).
func (d *Dir) finishMode(f *os.File) error {
	if err := f.Chmod(d.fileMode()); err != nil {
		return err
	}
	if d.owner != nil {
		return f.Chown(d.owner[0], d.owner[1])
	}
	return nil
}

// refuseSpecialIn fails when p's file exists and is not a regular file (a
// directory, FIFO, device, socket or symlink).
func (d *Dir) refuseSpecialIn(p *place) error {
	fi, err := p.dir.Lstat(p.name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return d.wrap("stat", p.rel, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: %w (%s)", p.rel, ErrNotFile, kind(fi.Mode()))
	}
	return nil
}

// Read returns up to limit bytes of rel and whether the file was longer.
func (d *Dir) Read(rel string, limit int64) (data []byte, cut bool, err error) {
	f, fi, err := d.openRegular(rel)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	data, err = io.ReadAll(io.LimitReader(f, limit))
	if err != nil {
		return nil, false, d.wrap("read", rel, err)
	}
	return data, fi.Size() > limit, nil
}

// Stat returns information about rel without following a final symlink.
func (d *Dir) Stat(rel string) (fs.FileInfo, error) {
	p, err := d.place(rel, false)
	if err != nil {
		return nil, err
	}
	defer p.close()
	fi, err := p.dir.Lstat(p.name)
	if err != nil {
		return nil, d.wrap("stat", rel, err)
	}
	return fi, nil
}

// openRegular opens rel for reading, refusing anything but a regular file.
func (d *Dir) openRegular(rel string) (*os.File, fs.FileInfo, error) {
	p, err := d.place(rel, false)
	if err != nil {
		return nil, nil, err
	}
	defer p.close() // the file stays open
	return d.openRegularIn(p)
}

// openRegularIn opens p's file for reading, refusing anything but a
// regular file. The check happens on the opened handle, so a swap after
// the Lstat is caught; the open never follows a symlink nor blocks on a FIFO.
func (d *Dir) openRegularIn(p *place) (*os.File, fs.FileInfo, error) {
	rel := p.rel
	if err := d.refuseSpecialIn(p); err != nil {
		return nil, nil, err
	}
	f, err := p.dir.OpenFile(p.name, os.O_RDONLY|oNonblock|oNoFollow, 0)
	if err != nil {
		return nil, nil, d.wrap("open", rel, err)
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", rel, ErrNotFile)
	}
	return f, fi, nil
}

// wrap turns os errors into the package's sentinels with context.
func (d *Dir) wrap(op, rel string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s %s: %w", op, rel, ErrNotFound)
	case escapes(err):
		return fmt.Errorf("%s %s: %w", op, rel, ErrOutside)
	case errors.Is(err, syscall.ENOTDIR) || rootRefusal(err) == "not a directory":
		return fmt.Errorf("%s %s: %w: %w", op, rel, ErrNotFile, syscall.ENOTDIR) // a folder on its path is a file or a symlink
	case errors.Is(err, syscall.ELOOP):
		return fmt.Errorf("%s %s: %w (symlink)", op, rel, ErrNotFile)
	}
	return fmt.Errorf("%s %s: %w", op, rel, err)
}

// escapes reports an os.Root refusal to leave the root.
func escapes(err error) bool { return rootRefusal(err) == "path escapes from parent" }

// rootRefusal is the text of an os.Root error of its own (not an errno
// from the system): "path escapes from parent", or "not a directory" when
// it opens a file as a folder. os.Root exports no sentinels for them.
func rootRefusal(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return ""
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err.Error()
	}
	return ""
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m&fs.ModeDevice != 0:
		return "device"
	case m&fs.ModeSocket != 0:
		return "socket"
	}
	return "special file"
}
