//go:build linux

package quotafs

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/docker/go-units"
	"golang.org/x/sys/unix"
)

// tools are the programs an image needs (e2fsprogs, util-linux).
var tools = []string{"mkfs.ext4", "e2fsck", "resize2fs", "tune2fs", "losetup", "mount"}

// Available says why this host cannot keep owners on images, or nil.
func Available() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: the server does not run as root", ErrUnavailable)
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return fmt.Errorf("%w: no loop devices (/dev/loop-control)", ErrUnavailable)
	}
	for _, t := range tools {
		if tool(t) == "" {
			return fmt.Errorf("%w: %s is not installed (e2fsprogs, util-linux)", ErrUnavailable, t)
		}
	}
	self, err1 := os.Readlink("/proc/self/ns/mnt")
	host, err2 := os.Readlink("/proc/1/ns/mnt")
	if err1 == nil && err2 == nil && self != host {
		return fmt.Errorf("%w: the server runs in a mount namespace of its own (in a container?), where the container engine would not see its mounts", ErrUnavailable)
	}
	return nil
}

// tool is the path of program name, "" when it is missing.
func tool(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range []string{"/usr/sbin", "/sbin"} {
		if p := filepath.Join(d, name); unix.Access(p, unix.X_OK) == nil {
			return p
		}
	}
	return ""
}

// run runs a tool; exit codes up to okCode count as success (e2fsck's 1
// and 2: errors corrected).
func run(okCode int, name string, args ...string) error {
	out, err := exec.Command(tool(name), args...).CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() <= okCode {
		return nil
	}
	if err != nil {
		return fmt.Errorf("quota filesystem: %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// imageSize is the size to make the image for s at first: room for the
// quota and the headroom, its inode table, and the filesystem's own
// blocks, generously (fit then cuts it to size).
func imageSize(s Spec) int64 {
	data := s.Bytes + Headroom
	size := data + inodes(s)*256 + data/32 + 4<<20
	return (size + 1<<20 - 1) &^ (1<<20 - 1)
}

// inodes is the image's inode count: the entries quota and a little room.
func inodes(s Spec) int64 { return s.Files + 64 + reservedInodes + int64(len(s.Binds)) }

// mountImage mounts the image at v.mnt, making it first, or reuses the
// mount a server left (growing the image to a larger quota).
func (v *Volume) mountImage(mounts map[string]mount) error {
	if err := ownSubdir(v.mnt); err != nil {
		return err
	}
	if m, ok := mounts[v.mnt]; ok {
		if err := v.ours(m); err != nil {
			return err
		}
		v.spec.Log.Info("quota filesystem: reusing the mount a server left", "dir", v.spec.Dir, "device", v.dev)
		return v.grow(false)
	}
	for _, b := range v.spec.Binds {
		if _, ok := mounts[filepath.Clean(b.Target)]; ok {
			return fmt.Errorf("quota filesystem: %s is a mount point pybox did not make: unmount it", b.Target)
		}
	}
	if dev := attached(v.image); dev != "" && !detached(v.image, time.Second) {
		// Unmounted here, but still in use: a container of an earlier server
		// holds it in its own mount namespace. Mount that very filesystem
		// (never check or resize a live one); its loop device goes with its
		// last user.
		v.spec.Log.Info("quota filesystem: the image is still in use (by a container of an earlier server?): mounting it as it is", "image", v.image, "device", dev)
		if err := run(0, "mount", "-t", "ext4", "-o", "nosuid,nodev", dev, v.mnt); err == nil {
			if err := v.mounted(); err != nil {
				return err
			}
			return v.grow(false)
		}
	}
	if err := v.ensureImage(imageSize(v.spec)); err != nil {
		return err
	}
	if err := run(2, "e2fsck", "-p", v.image); err != nil {
		return err
	}
	if err := v.mountLoop(); err != nil {
		return err
	}
	return v.grow(true)
}

// mountLoop mounts the image at v.mnt on a loop device of its own (which
// detaches with the last unmount).
func (v *Volume) mountLoop() error {
	if err := run(0, "mount", "-t", "ext4", "-o", "loop,nosuid,nodev", v.image, v.mnt); err != nil {
		return err
	}
	return v.mounted()
}

// mounted checks that the image is what is mounted at v.mnt now.
func (v *Volume) mounted() error {
	after, err := readMounts()
	if err != nil {
		return err
	}
	return v.ours(after[v.mnt])
}

// detached waits, up to wait, for the loop device of image to detach (it
// does so shortly after its last unmount: there is no event to wait for),
// and reports whether it did.
func detached(image string, wait time.Duration) bool {
	deadline := time.Now().Add(wait)
	for attached(image) != "" {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// attached is the loop device that has image as its backing file, "" for
// none.
func attached(image string) string {
	names, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, n := range names {
		if b, err := os.ReadFile(n); err == nil && strings.TrimSpace(string(b)) == image {
			return "/dev/" + filepath.Base(filepath.Dir(filepath.Dir(n)))
		}
	}
	return ""
}

// ours checks that m is the image on a loop device, and keeps the device.
func (v *Volume) ours(m mount) error {
	name := strings.TrimPrefix(m.source, "/dev/")
	if m.fstype == "ext4" && strings.HasPrefix(name, "loop") && !strings.Contains(name, "/") {
		b, err := os.ReadFile(filepath.Join("/sys/block", name, "loop", "backing_file"))
		if err == nil && strings.TrimSpace(string(b)) == v.image {
			v.dev = m.source
			return nil
		}
	}
	return fmt.Errorf("quota filesystem: %s holds a mount pybox did not make (%s %s): unmount it", v.mnt, m.fstype, m.source)
}

// ensureImage makes the image if there is none, and checks an existing
// one: a plain file of root's that nobody else may read.
func (v *Volume) ensureImage(size int64) error {
	var st unix.Stat_t
	err := unix.Lstat(v.image, &st)
	if err == nil {
		if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Uid != 0 || st.Nlink != 1 || st.Mode&0o077 != 0 {
			return fmt.Errorf("quota filesystem: %s is not an image of pybox's (a file of root's, mode 0600, one link): remove it", v.image)
		}
		return nil
	}
	if !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("quota filesystem: %w", err)
	}
	tmp := v.image + ".new" // an interrupted mkfs leaves this, never a half-made image
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("quota filesystem: %w", err)
	}
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("quota filesystem: %w", err)
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("quota filesystem: %w", err)
	}
	if err := run(0, "mkfs.ext4", "-q", "-F", "-b", "4096", "-m", "0", "-N", strconv.FormatInt(inodes(v.spec), 10),
		"-O", "^has_journal", "-E", "nodiscard,root_owner=0:0", tmp); err != nil {
		return err
	}
	if err := fit(tmp, v.spec); err != nil {
		return err
	}
	v.spec.Log.Info("quota filesystem: made the owner's image", "image", v.image, "size", units.BytesSize(float64(size)))
	return os.Rename(tmp, v.image)
}
