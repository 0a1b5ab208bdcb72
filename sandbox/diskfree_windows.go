package sandbox

import "golang.org/x/sys/windows"

// diskFree is what the volume under dir has free for this user.
func diskFree(dir string) (int64, bool) {
	p, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return 0, false
	}
	var avail, total, free uint64
	if err := windows.GetDiskFreeSpaceEx(p, &avail, &total, &free); err != nil {
		return 0, false
	}
	return int64(avail), true
}
