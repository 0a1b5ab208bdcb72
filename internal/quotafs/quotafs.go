// Package quotafs keeps an owner's storage (a tenant's code storage, its
// sessions' folders and the output folders of its runs) on a filesystem
// image of its own, sized to its quota and loop-mounted under the state
// directory, with each folder bound to a subfolder of it. The kernel then
// refuses a write past the quota (ENOSPC) while it is made, dense or
// sparse, and the owner's usage is one statfs, whatever earlier runs left.
// It needs Linux, root, loop devices and e2fsprogs (mkfs.ext4, e2fsck,
// resize2fs, tune2fs); elsewhere Open fails with ErrUnavailable and the
// caller keeps measuring the folders (sandbox's meter).
package quotafs

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
)

// Mode is how an owner's storage quota is enforced.
type Mode string

// The modes: Auto is Filesystem where the host allows it, else Meter.
const (
	Auto       Mode = "auto"
	Filesystem Mode = "filesystem"
	Meter      Mode = "meter"
)

// ParseMode reads a mode setting ("" = Auto).
func ParseMode(s string) (Mode, error) {
	switch m := Mode(strings.ToLower(strings.TrimSpace(s))); m {
	case "":
		return Auto, nil
	case Auto, Filesystem, Meter:
		return m, nil
	}
	return "", fmt.Errorf("quota mode %q: give auto, filesystem or meter", s)
}

// ErrUnavailable: the host cannot keep the storage on an image (not Linux,
// not root, no loop devices or e2fsprogs); Auto then falls back to the meter.
var ErrUnavailable = errors.New("a filesystem image per owner is not available here")

// ErrOccupied: a folder to bind already holds files from before (kept
// without an image); they would be hidden under the mount, so Open leaves
// them alone. Auto then falls back to the meter for that owner.
var ErrOccupied = errors.New("the folder already holds files kept without a filesystem image")

// Headroom is how far past its quota the kernel lets an owner write (ext4
// refuses buffered writes up to about 1 MiB before that): the meter, one
// statfs every 25 ms, sees the owner over its quota and stops its
// programs (quota_exceeded), and the kernel bounds what they write until
// then.
const Headroom = 2 << 20

// Spec is one owner's image.
type Spec struct {
	// Dir holds the image, its mount point and its lock: a folder of root's
	// in the state directory that no container mounts.
	Dir   string
	Bytes int64 // the quota in bytes
	Files int64 // the quota in files and folders (inodes)
	// Binds maps a subfolder name of the image to the owner's folder bound
	// to it (e.g. "code" → the code storage).
	Binds []Bind
	Log   *slog.Logger
}

// Bind is one owner's folder kept in the image.
type Bind struct {
	Name   string // subfolder of the image: a plain name
	Target string // the owner's folder, absolute
}
