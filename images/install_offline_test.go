package images_test

import (
	"net/netip"

	"fmt"
	"github.com/pybox-dev/pybox/internal/egress"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pybox-dev/pybox/images"
	"github.com/pybox-dev/pybox/internal/testenv"
)

// loopbackIndex is a PEP 503 package index on 127.0.0.1 serving the wheels
// of a folder; it counts the requests to /probe.
type loopbackIndex struct {
	url    string
	port   int
	probes atomic.Int32
}

func newLoopbackIndex(t *testing.T, wheels string) *loopbackIndex {
	t.Helper()
	idx := &loopbackIndex{}
	mux := http.NewServeMux()
	mux.HandleFunc("/probe", func(w http.ResponseWriter, r *http.Request) {
		idx.probes.Add(1)
		t.Logf("probe from an install: %s", r.URL.RawQuery)
	})
	mux.HandleFunc("/simple/{name}/", func(w http.ResponseWriter, r *http.Request) {
		prefix := strings.ReplaceAll(r.PathValue("name"), "-", "_") + "-"
		entries, _ := os.ReadDir(wheels)
		fmt.Fprint(w, "<html><body>\n")
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), prefix) {
				fmt.Fprintf(w, "<a href=\"/files/%s\">%s</a>\n", e.Name(), e.Name())
			}
		}
		fmt.Fprint(w, "</body></html>\n")
	})
	mux.Handle("/files/", http.StripPrefix("/files/", http.FileServer(http.Dir(wheels))))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	idx.url = srv.URL
	fmt.Sscanf(srv.URL[strings.LastIndexByte(srv.URL, ':')+1:], "%d", &idx.port)
	return idx
}

// index is the loopback index reached as the download step reaches any:
// by name (index.test, mapped to 127.0.0.1 by the test-only resolver)
// through pybox's egress proxy, with 127.0.0.1 explicitly allowed.
func (idx *loopbackIndex) index(t *testing.T) images.Index {
	r, err := egress.NewTestResolver(map[string][]netip.Addr{"index.test": {netip.MustParseAddr("127.0.0.1")}})
	if err != nil {
		t.Fatal(err)
	}
	return images.Index{URL: fmt.Sprintf("http://index.test:%d/simple/", idx.port), Egress: egress.Config{
		AllowAddrs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, Resolver: r}}
}

// pthProbe is a module a .pth file imports at every interpreter start: it
// reports the network interfaces it sees and whether it reached the index.
const pthProbe = `import socket, sys
ifaces = ",".join(sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:]))
try:
    s = socket.create_connection(("127.0.0.1", %d), timeout=2)
    s.sendall(("GET /probe?ifaces=" + ifaces + " HTTP/1.0\r\n\r\n").encode())
    s.close()
    reached = True
except OSError:
    reached = False
print("PYBOX-PTH ifaces=%%s reached=%%s" %% (ifaces, reached), file=sys.stderr)
`

// TestInstallRunsPackageCodeOffline: a wheel installed earlier ships a
// .pth file, which runs at every start of the environment's interpreter.
// The next install from an index (here on 127.0.0.1, with the host
// network) must not run it with the network on: packages are fetched from
// the base image, and the install, where the .pth runs, has only lo.
func TestInstallRunsPackageCodeOffline(t *testing.T) {
	eng := testenv.Docker(t)
	layers := testenv.LockLayerCache(t, eng)
	t.Cleanup(func() { layers.RemoveNew(t) })
	testenv.RuntimeImage(t, eng, images.VariantBase)
	wheels := testenv.Wheelhouse(t)
	idx := newLoopbackIndex(t, wheels)
	testenv.WriteWheel(t, wheels, testenv.Wheel{Name: "pyboxpth", Version: "1.0", Code: "X = 1\n", Files: map[string]string{
		"pyboxpth.pth": "import pyboxpth_probe\n", "pyboxpth_probe.py": fmt.Sprintf(pthProbe, idx.port)}})
	in := &images.Installer{Engine: eng, Owner: newTestOwner(t), Index: idx.index(t)}
	env, err := images.Environment{}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	env.ImageID = inspect(t, eng, env.Image).ID
	first, err := in.Install(t.Context(), env, []string{"pyboxpth"})
	if err != nil {
		t.Fatalf("install pyboxpth from the loopback index: %v\n%s", err, first.Output)
	}
	second, err := in.Install(t.Context(), first.Env, []string{"pyboxother"})
	if err != nil {
		t.Fatalf("install pyboxother on top: %v\n%s", err, second.Output)
	}
	for _, want := range []string{"downloading through pybox's egress proxy; interfaces: lo\n", fmt.Sprintf("network: allowed index.test:%d", idx.port)} {
		if !strings.Contains(second.Output, want) {
			t.Errorf("the download step's output lacks %q:\n%s", want, second.Output)
		}
	}
	if n := idx.probes.Load(); n > 0 {
		t.Errorf("the .pth of an installed package reached the index %d times during the next install", n)
	}
	if !strings.Contains(second.Output, "PYBOX-PTH ifaces=lo reached=False") {
		t.Errorf("the .pth did not run (with only lo) during the next install; its output:\n%s", second.Output)
	}
	if strings.Contains(second.Output, "reached=True") || strings.Contains(first.Output, "PYBOX-PTH") {
		t.Errorf("the .pth ran with the network on:\n%s\n%s", first.Output, second.Output)
	}
}

// TestInstallRefusesPrivateIndexAddress: the download step reaches only
// public addresses unless the operator names one: an index name that
// resolves to 127.0.0.1 is refused by the proxy without the allowance.
func TestInstallRefusesPrivateIndexAddress(t *testing.T) {
	eng := testenv.Docker(t)
	testenv.RuntimeImage(t, eng, images.VariantBase)
	idx := newLoopbackIndex(t, testenv.Wheelhouse(t))
	index := idx.index(t)
	index.Egress.AllowAddrs = nil
	in := &images.Installer{Engine: eng, Owner: newTestOwner(t), Index: index}
	env, err := images.Environment{}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	env.ImageID = inspect(t, eng, env.Image).ID
	res, err := in.Install(t.Context(), env, []string{"pyboxother"})
	if err == nil {
		t.Fatalf("an index on a loopback address was reached without the operator's allowance:\n%s", res.Output)
	}
	if want := fmt.Sprintf("network: refused index.test:%d", idx.port); !strings.Contains(res.Output, want) {
		t.Errorf("the install's output lacks %q:\n%s", want, res.Output)
	}
}

// TestInstallFromPrivateWheelhouse: a wheelhouse only its owner can read
// (a root operator's mktemp -d) works: the unprivileged install user gets
// a copy it can read.
func TestInstallFromPrivateWheelhouse(t *testing.T) {
	eng := testenv.Docker(t)
	layers := testenv.LockLayerCache(t, eng)
	t.Cleanup(func() { layers.RemoveNew(t) })
	testenv.RuntimeImage(t, eng, images.VariantBase)
	wh := testenv.Wheelhouse(t)
	entries, _ := os.ReadDir(wh)
	for _, e := range entries {
		if err := os.Chmod(filepath.Join(wh, e.Name()), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(wh, 0o700); err != nil {
		t.Fatal(err)
	}
	in := &images.Installer{Engine: eng, Owner: newTestOwner(t), Index: images.Index{Wheelhouse: wh, Network: "none"}}
	env, err := images.Environment{}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	env.ImageID = inspect(t, eng, env.Image).ID
	res, err := in.Install(t.Context(), env, []string{"pyboxdemo"})
	if err != nil {
		t.Fatalf("install from a 0700 wheelhouse: %v\n%s", err, res.Output)
	}
	if got := runOutput(t, eng, res.Env.ImageID, "import pyboxdemo; print(pyboxdemo.answer())"); got != "42\n" {
		t.Errorf("pyboxdemo in the layer: %q", got)
	}
}

// TestInstallSdistFromIndex: with sdists allowed, a source distribution
// from an index is fetched by the download step and built offline by the
// install, unprivileged as ever.
func TestInstallSdistFromIndex(t *testing.T) {
	eng := testenv.Docker(t)
	layers := testenv.LockLayerCache(t, eng)
	t.Cleanup(func() { layers.RemoveNew(t) })
	testenv.RuntimeImage(t, eng, images.VariantBase)
	wheels := testenv.Wheelhouse(t)
	testenv.WriteHostileSdist(t, wheels)
	idx := newLoopbackIndex(t, wheels)
	index := idx.index(t)
	index.AllowSdist = true
	in := &images.Installer{Engine: eng, Owner: newTestOwner(t), Index: index}
	env, err := images.Environment{}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	env.ImageID = inspect(t, eng, env.Image).ID
	res, err := in.Install(t.Context(), env, []string{testenv.HostileSdistName})
	if err != nil {
		t.Fatalf("install an sdist from the loopback index: %v\n%s", err, res.Output)
	}
	if got := runOutput(t, eng, res.Env.ImageID, testenv.HostileReport); got != testenv.HostileReportUnprivileged {
		t.Errorf("the build saw (uid caps nnp /tmp /etc-write prefix-write /etc-file prefix-file):\n got %q\nwant %q",
			got, testenv.HostileReportUnprivileged)
	}
}
