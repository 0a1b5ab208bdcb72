//go:build !windows

package sandbox

import "golang.org/x/sys/unix"

// diskFree is what the disk under dir has free for unprivileged users.
func diskFree(dir string) (int64, bool) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), true // Bsize is uint32 on darwin, int64 on linux
}
