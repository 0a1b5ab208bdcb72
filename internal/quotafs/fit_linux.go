//go:build linux

package quotafs

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// fit resizes the unmounted image at path so that its files can take the
// quota and the headroom and not a block more, whoever writes them: its
// free blocks, less the clusters the kernel holds back for itself (2% of
// the blocks, at most 4096), are that size. Reserved blocks would not do:
// root may use them, and gVisor's gofer writes as root.
func fit(path string, s Spec) error {
	want := (s.Bytes + Headroom + blockSize - 1) / blockSize
	for range 3 {
		blocks, free, err := geometry(path)
		if err != nil {
			return err
		}
		room := free - min(blocks/50, 4096)
		if room >= want && room <= want+2 {
			return nil
		}
		next := blocks + want - room
		if err := resize(path, blocks, next); err != nil {
			return err
		}
	}
	return nil // close enough: the overhead moved with the size
}

// blockSize is the images' block size (mkfs -b).
const blockSize = 4096

// resize resizes the image file at path and its filesystem from blocks to
// next blocks, offline.
func resize(path string, blocks, next int64) error {
	if next > blocks {
		if err := os.Truncate(path, next*blockSize); err != nil {
			return fmt.Errorf("quota filesystem: %w", err)
		}
	}
	if err := run(2, "e2fsck", "-f", "-p", path); err != nil {
		return err
	}
	if err := run(0, "resize2fs", path, strconv.FormatInt(next, 10)); err != nil {
		return err
	}
	if next < blocks {
		if err := os.Truncate(path, next*blockSize); err != nil {
			return fmt.Errorf("quota filesystem: %w", err)
		}
	}
	return nil
}

// geometry reads the block count and the free blocks of the image at
// path.
func geometry(path string) (blocks, free int64, err error) {
	out, err := exec.Command(tool("tune2fs"), "-l", path).Output()
	if err != nil {
		return 0, 0, fmt.Errorf("quota filesystem: tune2fs -l %s: %w", path, err)
	}
	for line := range strings.Lines(string(out)) {
		k, v, _ := strings.Cut(line, ":")
		n, perr := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch {
		case perr != nil:
		case k == "Block count":
			blocks = n
		case k == "Free blocks":
			free = n
		}
	}
	if blocks == 0 {
		return 0, 0, fmt.Errorf("quota filesystem: tune2fs -l %s: no block count", path)
	}
	return blocks, free, nil
}
