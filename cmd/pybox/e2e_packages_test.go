//go:build !windows

package main

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/pybox-dev/pybox/internal/testenv"
	"github.com/pybox-dev/pybox/tools"
)

// packageServer starts a server that installs from wh with no network.
// Package-layer images the test created are removed at its end.
func packageServer(t *testing.T, wh string, env ...string) *server {
	t.Helper()
	layers := dropTestLayers(t)
	s := startServer(t, append([]string{"PYBOX_WHEELHOUSE=" + wh, "PYBOX_INSTALL_NETWORK=none"}, env...)...)
	s.layers = layers
	return s
}

// dropTestLayers holds the layer cache for the test (see
// testenv.LockLayerCache) and removes, when it ends, the package layers
// made during it.
func dropTestLayers(t *testing.T) *testenv.Layers {
	t.Helper()
	layers := testenv.LockLayerCache(t, testenv.Docker(t))
	t.Cleanup(func() { layers.RemoveNew(t) })
	return layers
}

// install calls install_dependencies and fails the test on a tool error.
func (s *server) install(pkgs ...string) tools.InstallDependenciesOutput {
	s.t.Helper()
	res := s.call("install_dependencies", map[string]any{"packages": pkgs})
	if res.IsError {
		s.t.Fatalf("install %v: %s", pkgs, text(res))
	}
	return decode[tools.InstallDependenciesOutput](s.t, res)
}

func (s *server) envConfig() tools.EnvironmentView {
	s.t.Helper()
	return decode[tools.EnvironmentView](s.t, s.call("get_environment_config", map[string]any{}))
}

// containersCreated counts the containers this server created while f
// runs, except the warm pool's, which refills after runs on its own (other
// test packages may be creating their own on the daemon).
func (s *server) containersCreated(f func()) int {
	s.t.Helper()
	mine := map[string]string{"pybox.managed": "true", "pybox.pid": strconv.Itoa(s.cmd.Process.Pid)}
	stop := s.eng.WatchContainerCreates(context.Background(), mine, "pybox.role", "pool")
	f()
	n, err := stop()
	if err != nil {
		s.t.Fatal(err)
	}
	return n
}

// TestInstallThenImport: an install is visible to later runs, its cache hit
// starts no container, and the versions are reported.
func TestInstallThenImport(t *testing.T) {
	layerTest(t)
	wh := testenv.Wheelhouse(t)
	s := packageServer(t, wh)
	first := s.install("pyboxdemo")
	if first.Cached || first.Installer != "pip" || first.Image == "" {
		t.Fatalf("first install: %+v; want a real pip install", first)
	}
	out, _ := s.exec(map[string]any{"code": "import pyboxdemo, pyboxbase\nprint(pyboxdemo.answer(), pyboxbase.VERSION)"})
	if out.Stdout != "42 2.0\n" {
		t.Fatalf("import after install: stdout %q stderr %q", out.Stdout, out.Stderr)
	}
	var again tools.InstallDependenciesOutput
	var hitText string
	n := s.containersCreated(func() {
		res := s.call("install_dependencies", map[string]any{"packages": []string{"PyBoxDemo"}})
		again, hitText = decode[tools.InstallDependenciesOutput](t, res), text(res)
	})
	if !again.Cached || !strings.Contains(hitText, "cached") || n != 0 {
		t.Errorf("repeat install: cached=%v text=%q containers created=%d; want a cache hit with no container", again.Cached, hitText, n)
	}
	var st tools.CheckInstalledPackagesOutput
	n = s.containersCreated(func() {
		for range 2 {
			st = decode[tools.CheckInstalledPackagesOutput](t, s.call("check_installed_packages",
				map[string]any{"packages": []string{"pyboxdemo", "PyBoxBase", "nosuchpkg"}}))
		}
	})
	want := []struct {
		installed bool
		version   string
	}{{true, "1.0"}, {true, "2.0"}, {false, ""}}
	for i, w := range want {
		if p := st.Packages[i]; p.Installed != w.installed || p.Version != w.version {
			t.Errorf("check %s: installed=%v version=%q; want %v %q", p.Name, p.Installed, p.Version, w.installed, w.version)
		}
	}
	if n > 1 {
		t.Errorf("two checks of one image started %d containers; want at most one (the listing is cached)", n)
	}
}

// TestLayerCacheAcrossServers: a second server asking for the same
// packages on the same base reuses the committed layer without a container.
func TestLayerCacheAcrossServers(t *testing.T) {
	layerTest(t)
	wh := testenv.Wheelhouse(t)
	s1 := packageServer(t, wh)
	first := s1.install("pyboxbase==1.0")
	s2 := packageServer(t, wh)
	var hit tools.InstallDependenciesOutput
	n := s2.containersCreated(func() { hit = s2.install("pyboxbase == 1.0") })
	if !hit.Cached || hit.Image != first.Image || n != 0 {
		t.Errorf("second server: cached=%v image %q (first %q), containers created %d; want the same layer, no container",
			hit.Cached, hit.Image, first.Image, n)
	}
	if out, _ := s2.exec(map[string]any{"code": "import pyboxbase; print(pyboxbase.VERSION)"}); out.Stdout != "1.0\n" {
		t.Errorf("import on the second server: %q %q", out.Stdout, out.Stderr)
	}
}

// TestConcurrentIdenticalInstalls run once.
func TestConcurrentIdenticalInstalls(t *testing.T) {
	layerTest(t)
	wh := testenv.Wheelhouse(t)
	testenv.WriteWheel(t, wh, testenv.Wheel{Name: "pyboxconc", Version: "1.0", Code: "X = 1\n"})
	s := packageServer(t, wh)
	var wg sync.WaitGroup
	results := make([]string, 4)
	installs := s.containersCreated(func() {
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := s.cs.CallTool(t.Context(), callParams("install_dependencies", map[string]any{"packages": []string{"pyboxconc"}}))
				if err != nil {
					results[i] = err.Error()
				} else if res.IsError {
					results[i] = text(res)
				}
			}()
		}
		wg.Wait()
	})
	for i, r := range results {
		if r != "" {
			t.Errorf("install %d failed: %s", i, r)
		}
	}
	if installs != 1 {
		t.Errorf("4 identical concurrent installs created %d containers; want exactly 1", installs)
	}
}

// TestFailedInstallChangesNothing: pip's message comes back, and the
// environment, the images and the containers are as before.
func TestFailedInstallChangesNothing(t *testing.T) {
	layerTest(t)
	s := packageServer(t, testenv.Wheelhouse(t))
	s.install("pyboxother")
	before := s.envConfig()
	res := s.call("install_dependencies", map[string]any{"packages": []string{"pyboxmissing==9.9"}})
	if !res.IsError || !strings.Contains(text(res), "pyboxmissing") || !strings.Contains(strings.ToLower(text(res)), "no matching distribution") {
		t.Fatalf("isError=%v text=%q; want pip's 'no matching distribution' message", res.IsError, text(res))
	}
	after := s.envConfig()
	if after.Image != before.Image || strings.Join(after.Requirements, " ") != strings.Join(before.Requirements, " ") {
		t.Errorf("environment changed by a failed install: %v -> %v", before, after)
	}
	s.layers.NoneWith(t, "pyboxmissing")
	if out, _ := s.exec(map[string]any{"code": "import pyboxother; print('ok')"}); out.Stdout != "ok\n" {
		t.Errorf("the environment no longer works after a failed install: %q %q", out.Stdout, out.Stderr)
	}
}

// TestBadSpecsRejectedBeforeAnyContainer names every bad spec and runs nothing.
func TestBadSpecsRejectedBeforeAnyContainer(t *testing.T) {
	layerTest(t)
	s := packageServer(t, testenv.Wheelhouse(t))
	bad := []string{"--index-url=http://evil", "requests; rm -rf /", "https://evil/x.whl", "-r requirements.txt", "pkg @ file:///etc/passwd"}
	var res string
	var isErr bool
	n := s.containersCreated(func() {
		r := s.call("install_dependencies", map[string]any{"packages": append([]string{"pyboxbase"}, bad...)})
		res, isErr = text(r), r.IsError
	})
	if !isErr || n != 0 {
		t.Fatalf("isError=%v containers=%d; want a tool error and no container", isErr, n)
	}
	for _, b := range bad {
		if !strings.Contains(res, b[:min(len(b), 12)]) {
			t.Errorf("error does not name %q: %s", b, res)
		}
	}
	if r := s.call("install_dependencies", map[string]any{"packages": []string{}}); !r.IsError {
		t.Errorf("an empty package list was accepted")
	}
}

// TestPreinstalledPackages are installed at start and cached for the next start.
func TestPreinstalledPackages(t *testing.T) {
	layerTest(t)
	wh := testenv.Wheelhouse(t)
	s := packageServer(t, wh, "PREINSTALLED_PACKAGES=pyboxbase==1.0 pyboxother")
	out, _ := s.exec(map[string]any{"code": "import pyboxbase, pyboxother; print(pyboxbase.VERSION)"})
	if out.Stdout != "1.0\n" {
		t.Fatalf("preinstalled packages missing: %q %q", out.Stdout, out.Stderr)
	}
	s2 := packageServer(t, wh, "PREINSTALLED_PACKAGES=pyboxbase==1.0 pyboxother")
	var cfg tools.EnvironmentView
	n := s2.containersCreated(func() { cfg = s2.envConfig() }) // waits for the start-up install
	if n != 0 || len(cfg.Requirements) != 2 {
		t.Errorf("second start: %d containers created, requirements %v; want the cached layer and no install", n, cfg.Requirements)
	}
}
