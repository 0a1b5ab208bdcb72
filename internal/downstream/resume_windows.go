//go:build windows

package downstream

import "os"

// resume does nothing on Windows, whose processes are not stopped by a
// signal.
func resume(*os.Process) {}
