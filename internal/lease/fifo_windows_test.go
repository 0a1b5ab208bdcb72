package lease

import (
	"os"
	"testing"
)

// mkfifo: Windows folders hold no FIFOs; a folder takes its place, as
// something that is not a regular file.
func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
}
