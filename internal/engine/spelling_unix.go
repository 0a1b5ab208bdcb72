//go:build !windows

package engine

import "runtime"

// desktopSpellings are the other names a desktop engine may record for the
// host folder src in a container's mounts: Docker Desktop for Mac shares
// host folders into its virtual machine under /host_mnt. On Linux the
// daemon records the path as given.
func desktopSpellings(src string) []string {
	if runtime.GOOS != "darwin" {
		return nil
	}
	return []string{"/host_mnt" + src}
}
