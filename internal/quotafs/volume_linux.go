//go:build linux

package quotafs

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pybox-dev/pybox/internal/storage"
)

// reservedInodes are the inodes a fresh ext4 uses (1–11: the root folder
// and lost+found among them); they are not the owner's.
const reservedInodes = 11

// Volume is one owner's storage kept on its image, mounted. Close it
// when done; the last server using it unmounts it.
type Volume struct {
	spec  Spec
	image string
	mnt   string
	dev   string   // the loop device
	lock  *os.File // shared while in use; exclusive while set up or torn down
	close sync.Once
	err   error
}

// Open mounts s's image (making it, or growing it to a larger quota,
// first) and binds each folder of s.Binds to its subfolder; a mount left
// by a server that was killed, or held by one still running, is reused,
// never stacked. It fails with ErrUnavailable when the host has no means,
// and with ErrOccupied, mounting nothing, when a folder to bind already
// holds files.
func Open(s Spec) (*Volume, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if s.Log == nil {
		s.Log = slog.New(slog.DiscardHandler)
	}
	if err := checkSpec(s); err != nil {
		return nil, err
	}
	dir, err := filepath.EvalSymlinks(s.Dir)
	if err != nil {
		return nil, fmt.Errorf("quota filesystem: %w", err)
	}
	s.Dir = dir
	lock, err := openLock(s.Dir)
	if err != nil {
		return nil, err
	}
	v := &Volume{spec: s, image: filepath.Join(s.Dir, "image.ext4"), mnt: filepath.Join(s.Dir, "mnt"), lock: lock}
	if err := v.setUpOrJoin(); err != nil {
		lock.Close()
		return nil, err
	}
	return v, nil
}

// setUpOrJoin sets the volume up when no other server uses it (its lock
// taken exclusively, then shared), or joins the mounts of the server that
// does (the lock shared: nobody tears them down meanwhile).
func (v *Volume) setUpOrJoin() error {
	fd := int(v.lock.Fd())
	for range 10 {
		if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) == nil {
			if err := v.setUp(); err != nil {
				return errors.Join(err, v.tearDown())
			}
			return unix.Flock(fd, unix.LOCK_SH)
		}
		if err := unix.Flock(fd, unix.LOCK_SH); err != nil {
			return fmt.Errorf("quota filesystem: lock: %w", err)
		}
		if v.joined() {
			v.spec.Log.Info("quota filesystem: another server on the same state directory has it mounted: sharing it", "dir", v.spec.Dir)
			return nil
		}
		if err := unix.Flock(fd, unix.LOCK_UN); err != nil { // it was being torn down: set it up again
			return fmt.Errorf("quota filesystem: lock: %w", err)
		}
	}
	return errors.New("quota filesystem: other servers keep setting it up and tearing it down: try again")
}

// joined reports whether the image and every folder are mounted as a
// server that uses them set them up.
func (v *Volume) joined() bool {
	mounts, err := readMounts()
	if err != nil || v.ours(mounts[v.mnt]) != nil {
		return false
	}
	for _, b := range v.spec.Binds {
		if _, ok := mounts[filepath.Clean(b.Target)]; !ok || !sameDir(filepath.Join(v.mnt, b.Name), b.Target) {
			return false
		}
	}
	return true
}

// checkSpec refuses names that are not plain and targets that are not
// absolute, and makes the folder of the image, root's alone.
func checkSpec(s Spec) error {
	if s.Bytes <= 0 || s.Files <= 0 || len(s.Binds) == 0 || !filepath.IsAbs(s.Dir) {
		return errors.New("quota filesystem: a quota in bytes and files, folders to bind and an absolute folder for the image are required")
	}
	for _, b := range s.Binds {
		if b.Name == "" || b.Name != filepath.Base(b.Name) || b.Name == "." || b.Name == ".." || !filepath.IsAbs(b.Target) {
			return fmt.Errorf("quota filesystem: bad folder %q → %q", b.Name, b.Target)
		}
	}
	return ownDir(s.Dir)
}

// setUp checks the folders to bind, mounts the image and binds them.
func (v *Volume) setUp() error {
	mounts, err := readMounts()
	if err != nil {
		return err
	}
	for _, b := range v.spec.Binds {
		if err := vacant(b.Target, mounts); err != nil {
			return err
		}
	}
	if err := v.mountImage(mounts); err != nil {
		return err
	}
	if err := v.bindAll(); err != nil {
		return err
	}
	return v.trim()
}

// bindAll makes the image's subfolders and binds each target to its own,
// unless a mount left by an earlier server already does.
func (v *Volume) bindAll() error {
	mounts, err := readMounts()
	if err != nil {
		return err
	}
	for _, b := range v.spec.Binds {
		src := filepath.Join(v.mnt, b.Name)
		if err := layoutDir(src); err != nil {
			return err
		}
		if _, ok := mounts[filepath.Clean(b.Target)]; ok {
			if !sameDir(src, b.Target) {
				return fmt.Errorf("quota filesystem: %s is a mount point pybox did not make: unmount it", b.Target)
			}
			continue
		}
		if err := bind(src, b.Target); err != nil {
			return err
		}
	}
	return nil
}

// Usage is what the owner's folders hold: the blocks and inodes used on
// the image, less those of a fresh one. It costs one statfs.
func (v *Volume) Usage() (storage.Usage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(v.mnt, &st); err != nil {
		return storage.Usage{}, fmt.Errorf("quota filesystem: %w", err)
	}
	return storage.Usage{
		Bytes: int64(st.Blocks-st.Bfree) * st.Bsize,
		Files: max(int64(st.Files-st.Ffree)-reservedInodes-int64(len(v.spec.Binds)), 0),
	}, nil
}

// HostDir is the folder of the image on the host's disk (where the disk
// reserve is checked).
func (v *Volume) HostDir() string { return v.spec.Dir }

// Close unmounts the folders and the image unless another server still
// uses them (the mounts then stay for it). Safe twice.
func (v *Volume) Close() error {
	v.close.Do(func() {
		defer v.lock.Close()
		if err := unix.Flock(int(v.lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			v.spec.Log.Info("the owner's quota filesystem stays mounted: another server uses it", "dir", v.spec.Dir)
			return
		}
		v.err = v.tearDown()
	})
	return v.err
}

// tearDown unmounts the binds, then the image (its loop device detaches
// with it).
func (v *Volume) tearDown() error {
	var errs []error
	for _, b := range slices.Backward(v.spec.Binds) {
		if isMounted(b.Target) {
			errs = append(errs, v.unmount(b.Target))
		}
	}
	if isMounted(v.mnt) {
		errs = append(errs, v.unmount(v.mnt))
		if !detached(v.image, 2*time.Second) {
			v.spec.Log.Info("quota filesystem: unmounted here, still in use (by a container?): its loop device detaches once that ends", "image", v.image)
		}
	}
	return errors.Join(errs...)
}

// unmount unmounts path, lazily when something still has it open.
func (v *Volume) unmount(path string) error {
	err := unix.Unmount(path, unix.UMOUNT_NOFOLLOW)
	if errors.Is(err, unix.EBUSY) {
		v.spec.Log.Warn("quota filesystem busy: detached, it goes once nothing uses it", "path", path)
		err = unix.Unmount(path, unix.UMOUNT_NOFOLLOW|unix.MNT_DETACH)
	}
	if err != nil {
		return fmt.Errorf("quota filesystem: unmount %s: %w", path, err)
	}
	return nil
}
