//go:build linux

package quotafs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/docker/go-units"
	"golang.org/x/sys/unix"
)

// capacity is, in blocks, what files may take on the mounted image (its
// blocks less ext4's own and the clusters the kernel holds back), and
// what the quota and the headroom ask for.
func (v *Volume) capacity() (have, want int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(v.mnt, &st); err != nil {
		return 0, 0, fmt.Errorf("quota filesystem: %w", err)
	}
	b, err := os.ReadFile(filepath.Join("/sys/fs/ext4", filepath.Base(v.dev), "reserved_clusters"))
	if err != nil {
		return 0, 0, fmt.Errorf("quota filesystem: %w", err)
	}
	resv, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("quota filesystem: reserved clusters: %w", err)
	}
	return int64(st.Blocks) - resv, (v.spec.Bytes + Headroom + blockSize - 1) / blockSize, nil
}

// grow enlarges the mounted image when the quota grew past it: offline
// when this server mounted it (unmount, resize2fs, mount again), else
// online, which needs CAP_SYS_RESOURCE (without it the image keeps its
// size until a start finds it unused). A smaller quota keeps the image,
// never losing a file (trim holds the excess back from programs).
func (v *Volume) grow(own bool) error {
	for range 3 {
		have, want, err := v.capacity()
		if err != nil || have >= want {
			return err
		}
		blocks, _, err := geometry(v.dev)
		if err != nil {
			return err
		}
		next := blocks + (want - have) + (want-have)/16 + 1 // new block groups bring blocks of their own
		v.spec.Log.Info("quota filesystem: the quota grew: growing the owner's image", "image", v.image,
			"from", units.BytesSize(float64(have*blockSize)), "to", units.BytesSize(float64(want*blockSize)))
		if !own {
			return v.growOnline(next)
		}
		if err := v.unmount(v.mnt); err != nil {
			return err
		}
		if !detached(v.image, 2*time.Second) {
			return fmt.Errorf("quota filesystem: %s stays in use after its unmount: not resized", v.image)
		}
		if err := resize(v.image, blocks, next); err != nil {
			return err
		}
		if err := v.mountLoop(); err != nil {
			return err
		}
	}
	return nil
}

// growOnline grows the image in use to next blocks, or says why not.
func (v *Volume) growOnline(next int64) error {
	err := os.Truncate(v.image, next*blockSize)
	if err == nil {
		err = run(0, "losetup", "-c", v.dev)
	}
	if err == nil {
		err = run(0, "resize2fs", v.dev, strconv.FormatInt(next, 10))
	}
	if err != nil {
		v.spec.Log.Warn("quota filesystem: the image in use could not grow: programs keep its old size until a server starts with it unused (stop every server on this state directory and let their containers go, then start one)",
			"image", v.image, "err", err)
	}
	return nil
}
