//go:build linux

package quotafs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// mount is one line of /proc/self/mountinfo.
type mount struct {
	fstype, source string
}

// readMounts maps each mount point of this mount namespace to its mount
// (the topmost one, where several are stacked).
func readMounts() (map[string]mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("quota filesystem: %w", err)
	}
	defer f.Close()
	return parseMounts(f)
}

// parseMounts reads mountinfo lines ("id parent maj:min root point opts
// ... - fstype source superopts").
func parseMounts(r io.Reader) (map[string]mount, error) {
	out := map[string]mount{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(tail) < 2 {
			continue
		}
		out[unescape(fields[4])] = mount{fstype: tail[0], source: unescape(tail[1])}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("quota filesystem: read mountinfo: %w", err)
	}
	return out, nil
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// isMounted reports whether path is a mount point.
func isMounted(path string) bool {
	m, err := readMounts()
	if err != nil {
		return false
	}
	_, ok := m[filepath.Clean(path)]
	return ok
}

// vacant checks that target may be bound: missing, an empty folder, or a
// mount point (checked against the image once it is mounted); never a
// symlink or anything else.
func vacant(target string, mounts map[string]mount) error {
	fi, err := os.Lstat(target)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("quota filesystem: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("quota filesystem: %s is not a folder (%s): remove it", target, fi.Mode().Type())
	}
	if _, ok := mounts[filepath.Clean(target)]; ok {
		return nil
	}
	d, err := os.Open(target)
	if err != nil {
		return fmt.Errorf("quota filesystem: %w", err)
	}
	defer d.Close()
	if names, _ := d.Readdirnames(1); len(names) > 0 {
		return fmt.Errorf("%w: %s (a mount there would hide them): move them away, or keep the meter (PYBOX_QUOTA_MODE=meter)", ErrOccupied, target)
	}
	return nil
}

// sameDir reports whether a and b are the same folder (not following a
// final symlink).
func sameDir(a, b string) bool {
	var sa, sb unix.Stat_t
	if unix.Lstat(a, &sa) != nil || unix.Lstat(b, &sb) != nil {
		return false
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino && sa.Mode&unix.S_IFMT == unix.S_IFDIR
}

// bind binds src over target, making target (a folder) if missing; the
// target is opened without following a symlink, and the mount is made on
// that very folder.
func bind(src, target string) error {
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return fmt.Errorf("quota filesystem: %w", err)
	}
	if err := os.Mkdir(target, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("quota filesystem: %w", err)
	}
	fd, err := unix.Open(target, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("quota filesystem: open %s (a folder, not a symlink): %w", target, err)
	}
	defer unix.Close(fd)
	if err := unix.Mount(src, "/proc/self/fd/"+strconv.Itoa(fd), "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("quota filesystem: bind %s: %w", target, err)
	}
	return nil
}

// ownDir makes dir (and its parents) and checks that it is a folder of
// root's that nobody else may write to, not a symlink.
func ownDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("quota filesystem: %w", err)
	}
	return ownSubdir(dir)
}

// ownSubdir makes dir if missing (its parent exists) and checks it as
// ownDir does.
func ownSubdir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("quota filesystem: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("quota filesystem: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != 0 {
		return fmt.Errorf("quota filesystem: %s must be a folder of root's (not a symlink): remove it", dir)
	}
	if st.Mode&0o022 != 0 {
		return fmt.Errorf("quota filesystem: %s may be written by others (mode %o): remove it", dir, st.Mode&0o777)
	}
	return nil
}

// layoutDir makes dir, a subfolder of the image, if missing, and checks
// that it is a folder (its owner and mode are the owner's folder's, set by
// the caller).
func layoutDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("quota filesystem: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("quota filesystem: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("quota filesystem: %s is not a folder", dir)
	}
	return nil
}

// openLock opens dir's lock file (a file of root's, not a symlink).
func openLock(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("quota filesystem: lock: %w", err)
	}
	return f, nil
}
