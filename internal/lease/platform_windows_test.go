package lease

import (
	"testing"

	"golang.org/x/sys/windows"
)

// skipOnWine skips a test of a Windows behaviour Wine does not have (CI
// runs the Windows build under Wine); why says which.
func skipOnWine(t *testing.T, why string) {
	t.Helper()
	if windows.NewLazySystemDLL("ntdll.dll").NewProc("wine_get_version").Find() == nil {
		t.Skip("under Wine: " + why)
	}
}

// modeChecked: Windows folders have no Unix permission bits.
const modeChecked = false
