package engine

import (
	"path/filepath"
	"strings"
)

// desktopSpellings are the other names Docker Desktop (WSL 2 or Hyper-V)
// may record for the Windows folder src (C:\Users\me\code) in a
// container's mounts: its virtual machine sees drive C: as
// /run/desktop/mnt/host/c, older versions as /host_mnt/c, and the CLI's
// own spelling is /c/Users/me/code.
func desktopSpellings(src string) []string {
	vol := filepath.VolumeName(src)
	if len(vol) != 2 || vol[1] != ':' {
		return nil // a UNC share: recorded as given
	}
	rest := filepath.ToSlash(strings.TrimPrefix(src, vol))
	drive := strings.ToLower(vol[:1])
	return []string{
		"/run/desktop/mnt/host/" + drive + rest,
		"/host_mnt/" + drive + rest,
		"/" + drive + rest,
		vol + rest, // C:/Users/me/code
	}
}
