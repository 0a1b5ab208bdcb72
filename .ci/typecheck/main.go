// Command typecheck type-checks every package of the module and its tests,
// with all their dependencies, for other platforms (GOOS/GOARCH), from
// source: what the compiler's front end checks (every file the platform's
// build constraints select, every identifier, type and import resolved),
// without its back end. .ci/platforms runs the full `go vet` (which compiles
// every dependency for export data) on linux/amd64 and windows/amd64, whose
// builds the tests and the Wine tests need anyway, and this on the other
// four platforms: a cold `go vet` per platform costs ~230 CPU-seconds here,
// most of it compiling dependencies into code nothing runs; this costs a
// fraction. Every file of the module is also vetted on linux or windows
// (pybox has no file for one architecture only).
//
// The standard library is checked without function bodies (Go's release
// builds on each of its ports); the module and its dependencies in full.
//
//	go run ./.ci/typecheck darwin/arm64 windows/arm64 ...
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: typecheck GOOS/GOARCH...")
		os.Exit(2)
	}
	failed := false
	for _, p := range os.Args[1:] {
		goos, goarch, ok := strings.Cut(p, "/")
		if !ok {
			fmt.Fprintf(os.Stderr, "typecheck: %q is not GOOS/GOARCH\n", p)
			os.Exit(2)
		}
		start := time.Now()
		n, errs := check(goos, goarch)
		for _, err := range errs {
			fmt.Fprintf(os.Stderr, "%s: %v\n", p, err)
		}
		if len(errs) > 0 {
			failed = true
			fmt.Fprintf(os.Stderr, "typecheck %s: %d errors\n", p, len(errs))
			continue
		}
		fmt.Fprintf(os.Stderr, "typecheck %s: %d packages ok (%.1f s)\n", p, n, time.Since(start).Seconds())
	}
	if failed {
		os.Exit(1)
	}
}

// pkg is what `go list -json` says of one package.
type pkg struct {
	ImportPath string
	Name       string
	Dir        string
	GoFiles    []string
	CgoFiles   []string
	Imports    []string
	ImportMap  map[string]string
	Standard   bool
	Module     *struct {
		Path, GoVersion string
		Main            bool
	}
	Error *struct{ Err string }

	deps []*pkg
	done chan struct{}
	typ  *types.Package
	errs []error
}

// list runs go list for the platform: every package of the module, its
// test variants and all their dependencies, dependencies first.
func list(goos, goarch string) ([]*pkg, error) {
	cmd := exec.Command("go", "list", "-e", "-deps", "-test",
		"-json=ImportPath,Name,Dir,GoFiles,CgoFiles,Imports,ImportMap,Standard,Module,Error", "./...")
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0", "GOFLAGS=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %v: %s", err, stderr.Bytes())
	}
	var pkgs []*pkg
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		p := new(pkg)
		if err := dec.Decode(p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}

func check(goos, goarch string) (int, []error) {
	pkgs, err := list(goos, goarch)
	if err != nil {
		return 0, []error{err}
	}
	byPath := map[string]*pkg{}
	var errs []error
	for _, p := range pkgs {
		p.done = make(chan struct{})
		byPath[p.ImportPath] = p
		if p.Error != nil {
			errs = append(errs, fmt.Errorf("%s: %s", p.ImportPath, p.Error.Err))
		}
		if len(p.CgoFiles) > 0 && !p.Standard {
			errs = append(errs, fmt.Errorf("%s: needs cgo, which a cross build has not", p.ImportPath))
		}
	}
	if len(errs) > 0 {
		return 0, errs
	}
	var checked []*pkg
	for _, p := range pkgs {
		// The generated test mains (p.test) have no source on disk.
		if p.Name == "main" && strings.HasSuffix(p.ImportPath, ".test") {
			close(p.done)
			continue
		}
		for _, imp := range p.Imports {
			if imp == "unsafe" || imp == "C" {
				continue
			}
			d := byPath[imp]
			if d == nil {
				return 0, []error{fmt.Errorf("%s imports %s, which go list did not list", p.ImportPath, imp)}
			}
			p.deps = append(p.deps, d)
		}
		checked = append(checked, p)
	}
	sizes := types.SizesFor("gc", goarch)
	if sizes == nil {
		return 0, []error{fmt.Errorf("no sizes for GOARCH %s", goarch)}
	}
	// Each package is checked once its imports are, as many at once as
	// there are CPUs.
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for _, p := range checked {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(p.done)
			for _, d := range p.deps {
				<-d.done
			}
			sem <- struct{}{}
			defer func() { <-sem }()
			p.check(byPath, sizes)
		}()
	}
	wg.Wait()
	seen := map[string]bool{} // a package and its test variant fail alike
	for _, p := range checked {
		for _, err := range p.errs {
			if !seen[err.Error()] {
				seen[err.Error()] = true
				errs = append(errs, err)
			}
		}
	}
	return len(checked), errs
}

// check type-checks p from its files; its imports are checked already.
func (p *pkg) check(byPath map[string]*pkg, sizes types.Sizes) {
	for _, d := range p.deps {
		if d.typ == nil {
			return // not checked: an import failed (and said why)
		}
	}
	fset := token.NewFileSet()
	var files []*ast.File
	mode := parser.ParseComments | parser.SkipObjectResolution
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, mode)
		if err != nil {
			p.errs = append(p.errs, err)
			return
		}
		files = append(files, f)
	}
	conf := types.Config{
		Importer: importer(func(path string) (*types.Package, error) {
			if path == "unsafe" {
				return types.Unsafe, nil
			}
			if m, ok := p.ImportMap[path]; ok {
				path = m
			}
			if d := byPath[path]; d != nil && d.typ != nil {
				return d.typ, nil
			}
			return nil, fmt.Errorf("%s is not checked", path)
		}),
		Sizes:            sizes,
		IgnoreFuncBodies: p.Standard,
		Error:            func(err error) { p.errs = append(p.errs, err) },
	}
	if p.Module != nil && p.Module.GoVersion != "" {
		conf.GoVersion = "go" + p.Module.GoVersion
	}
	typ, _ := conf.Check(strings.Fields(p.ImportPath)[0], fset, files, nil)
	if len(p.errs) == 0 {
		p.typ = typ
	}
}

type importer func(path string) (*types.Package, error)

func (f importer) Import(path string) (*types.Package, error) { return f(path) }
