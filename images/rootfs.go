package images

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// pseudoDirs are kept as empty directories: their contents belong to the
// host (device nodes, a mounted /proc) and Docker provides them at run time.
var pseudoDirs = map[string]bool{"dev": true, "proc": true, "sys": true}

// writeRootfs writes the tree at root to w as a tar whose paths are
// relative to root. Modes, owners and symlinks are kept; hard links become
// separate files; device nodes, sockets and FIFOs are skipped.
func writeRootfs(w io.Writer, root string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil || rel == "." {
			return err
		}
		return addEntry(tw, path, filepath.ToSlash(rel))
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// addEntry writes one file, directory or symlink. It returns fs.SkipDir for
// a pseudo directory, so its contents are not walked.
func addEntry(tw *tar.Writer, path, name string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	mode := fi.Mode()
	if !mode.IsRegular() && !mode.IsDir() && mode&fs.ModeSymlink == 0 {
		return nil
	}
	link := ""
	if mode&fs.ModeSymlink != 0 {
		if link, err = os.Readlink(path); err != nil {
			return err
		}
	}
	hdr, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return fmt.Errorf("tar header for %s: %w", name, err)
	}
	// Names would come from the host's user database, not the tree's.
	hdr.Name, hdr.Uname, hdr.Gname = name, "", ""
	if mode.IsDir() {
		hdr.Name += "/"
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("tar header for %s: %w", name, err)
	}
	if mode.IsRegular() {
		return copyFile(tw, path, hdr.Size)
	}
	if mode.IsDir() && pseudoDirs[name] {
		return fs.SkipDir
	}
	return nil
}

// copyFile copies exactly size bytes of the file at path.
func copyFile(w io.Writer, path string, size int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := io.CopyN(w, f, size); err != nil {
		return fmt.Errorf("copy %s: %w", path, err)
	}
	return nil
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// readTail returns the last max bytes of the file at path, or "" when it
// cannot be read.
func readTail(path string, max int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > max {
		if _, err := f.Seek(-max, io.SeekEnd); err != nil {
			return ""
		}
	}
	data, err := io.ReadAll(io.LimitReader(f, max))
	if err != nil && !errors.Is(err, io.EOF) {
		return ""
	}
	return "\n" + path + ":\n" + string(bytes.TrimSpace(data))
}
