//go:build linux

package quotafs

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"github.com/docker/go-units"
	"golang.org/x/sys/unix"
)

// trim sets the image's reserved blocks (which only root, the server, may
// use) so that programs can use no more than the quota and the headroom:
// the image is made a little larger than that, and a smaller quota than
// the image was made for takes effect here too, as far as ext4 allows
// (half the blocks).
func (v *Volume) trim() error {
	var st unix.Statfs_t
	if err := unix.Statfs(v.mnt, &st); err != nil {
		return fmt.Errorf("quota filesystem: %w", err)
	}
	reserved, err := reservedBlocks(v.dev)
	if err != nil {
		return err
	}
	bs := uint64(st.Bsize)
	want := uint64(v.spec.Bytes+Headroom)/bs + 1 // blocks programs may use, used ones included
	have := st.Blocks - st.Bfree + st.Bavail
	next := int64(reserved) + int64(have) - int64(want)
	if limit := int64(st.Blocks / 2); next > limit {
		next = limit
		v.spec.Log.Warn("quota filesystem: the quota is smaller than the image was made for, and ext4 holds back at most half of it: the meter enforces the quota, the kernel a larger bound",
			"image", v.image, "kernel bound", units.BytesSize(float64((int64(have)-(next-int64(reserved)))*int64(bs))))
	}
	next = max(next, 0)
	if uint64(next) == reserved {
		return nil
	}
	return run(0, "tune2fs", "-r", strconv.FormatInt(next, 10), v.dev)
}

// reservedBlocks reads the reserved block count of dev.
func reservedBlocks(dev string) (uint64, error) {
	out, err := exec.Command(tool("tune2fs"), "-l", dev).Output()
	if err != nil {
		return 0, fmt.Errorf("quota filesystem: tune2fs -l %s: %w", dev, err)
	}
	for line := range strings.Lines(string(out)) {
		if v, ok := strings.CutPrefix(line, "Reserved block count:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("quota filesystem: tune2fs -l %s: no reserved block count", dev)
}
