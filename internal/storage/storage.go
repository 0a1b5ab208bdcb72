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
	if _, err := d.root.Lstat(rel); err == nil {
		return fmt.Errorf("create %s: %w", rel, fs.ErrExist)
	}
	return d.Write(rel, content)
}

// Write replaces rel with content atomically (temp file + rename), creating
// parent directories inside the root as needed.
func (d *Dir) Write(rel string, content []byte) error {
	return d.writeFrom(rel, bytes.NewReader(content))
}

// CopyFrom copies the regular file srcRel of src to rel in d, as Write
// does (atomically, parents created), without following symlinks in src.
func (d *Dir) CopyFrom(rel string, src *Dir, srcRel string) error {
	f, _, err := src.openRegular(srcRel)
	if err != nil {
		return err
	}
	defer f.Close()
	return d.writeFrom(rel, f)
}

// writeFrom replaces rel with what r holds (temp file + rename).
func (d *Dir) writeFrom(rel string, r io.Reader) error {
	if dir := filepath.Dir(rel); dir != "." {
		if err := d.mkdirAll(dir); err != nil {
			return d.wrap("create directory", dir, err)
		}
	}
	if err := d.refuseSpecial(rel); err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(rel), ".pybox-tmp-"+randomHex(6))
	f, err := d.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return d.wrap("write", rel, err)
	}
	_, werr := io.Copy(f, r)
	merr := d.finishMode(f)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, merr, serr, cerr); err != nil {
		_ = d.root.Remove(tmp) // best effort: the temp file is ours and useless now
		return d.wrap("write", rel, err)
	}
	if err := d.root.Rename(tmp, rel); err != nil {
		_ = d.root.Remove(tmp) // best effort, as above
		return d.wrap("write", rel, err)
	}
	return nil
}

// finishMode makes a new file readable by the sandbox whatever the
// server's umask, and gives it the sandbox owner when one is set (so
// programs can also append to files the tools wrote).
func (d *Dir) finishMode(f *os.File) error {
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	if d.owner != nil {
		return f.Chown(d.owner[0], d.owner[1])
	}
	return nil
}

// refuseSpecial fails when rel exists and is not a regular file (a
// directory, FIFO, device, socket or symlink).
func (d *Dir) refuseSpecial(rel string) error {
	fi, err := d.root.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return d.wrap("stat", rel, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: %w (%s)", rel, ErrNotFile, kind(fi.Mode()))
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
	fi, err := d.root.Lstat(rel)
	if err != nil {
		return nil, d.wrap("stat", rel, err)
	}
	return fi, nil
}

// openRegular opens rel for reading, refusing anything but a regular file.
// The check happens on the opened handle, so a swap after Lstat is caught.
func (d *Dir) openRegular(rel string) (*os.File, fs.FileInfo, error) {
	if err := d.refuseSpecial(rel); err != nil {
		return nil, nil, err
	}
	f, err := d.root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
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
	}
	return fmt.Errorf("%s %s: %w", op, rel, err)
}

// escapes reports an os.Root refusal: a path error that is not an errno is
// the root's own "path escapes from parent" (it has no exported sentinel).
func escapes(err error) bool {
	var pe *fs.PathError
	var errno syscall.Errno
	return errors.As(err, &pe) && !errors.As(err, &errno)
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
