package storage_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/internal/storage"
)

// A program that swaps a folder for a symlink leading out of the storage,
// again and again, while the file tools work in it: every call either
// works inside the storage or fails with one of the package's clear
// errors; nothing is written outside, and no temp file is left behind.
func TestFileOperationsUnderSymlinkSwaps(t *testing.T) {
	skipOnWine(t, symlinksPlanted)
	d := open(t)
	outside := t.TempDir()
	dir := filepath.Join(d.Path(), "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	put(t, filepath.Join(dir, "x.txt"), "start\n")
	var stop atomic.Bool
	var swapper, wg sync.WaitGroup
	swapper.Go(func() { // the program: d is a folder, then a symlink out, then a folder again
		for i := 0; !stop.Load(); i++ {
			aside := filepath.Join(d.Path(), fmt.Sprintf("aside-%d", i))
			if os.Rename(dir, aside) != nil {
				continue
			}
			os.Symlink(outside, dir)
			os.Remove(dir)
			os.Rename(aside, dir)
			time.Sleep(200 * time.Microsecond) // some calls find the folder in place
		}
	})
	clear := func(err error) bool {
		for _, s := range []error{storage.ErrOutside, storage.ErrNotFound, storage.ErrNotFile, storage.ErrBadName} {
			if errors.Is(err, s) {
				return true
			}
		}
		return false
	}
	var mu sync.Mutex
	unclear := map[string]int{}
	ok := 0
	note := func(op string, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			ok++
		} else if !clear(err) {
			unclear[op+": "+err.Error()]++
		}
	}
	for w := range 4 {
		wg.Go(func() {
			for i := range 300 {
				note("write", d.Write(fmt.Sprintf("d/w%d-%d.txt", w, i%5), []byte("w\n")))
				_, err := d.Append("d/x.txt", []byte("a\n"), 1<<20)
				note("append", err)
				_, _, err = d.Read("d/x.txt", 1<<20)
				note("read", err)
				_, _, err = d.List("d", 100)
				note("list", err)
				note("create", d.Create(fmt.Sprintf("d/c%d-%d.txt", w, i), []byte("c\n")))
			}
		})
	}
	wg.Wait()
	stop.Store(true)
	swapper.Wait()
	t.Logf("%d operations succeeded; unclear failures: %v", ok, unclear)
	if ok == 0 {
		t.Error("no operation succeeded: the test shows nothing about a folder in place")
	}
	if len(unclear) > 0 {
		t.Errorf("failures that are not a clear refusal: %v", unclear)
	}
	if ents, _ := os.ReadDir(outside); len(ents) > 0 {
		t.Errorf("written outside the storage: %v", ents)
	}
	filepath.WalkDir(d.Path(), func(p string, e fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(e.Name(), ".pybox-tmp-") {
			t.Errorf("temp file left behind: %s", p)
		}
		return nil
	})
}
