//go:build !windows

package lease

import "testing"

func skipOnWine(*testing.T, string) {}

// modeChecked: the folder's permission bits are checked.
const modeChecked = true
