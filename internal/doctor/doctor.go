package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pybox-dev/pybox/internal/app"
	"github.com/pybox-dev/pybox/internal/engine"
	"github.com/pybox-dev/pybox/internal/storage"
	"github.com/pybox-dev/pybox/sandbox"
)

// selfTest is the isolation probe doctor runs inside a sandbox.
const selfTest = `import json, os, socket
try:
    ifaces = sorted(os.listdir("/sys/class/net"))
except OSError:  # gVisor has no /sys/class/net
    ifaces = sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:])
r = {"uid": os.getuid(), "ifaces": ifaces}
try:
    socket.create_connection(("1.1.1.1", 53), timeout=1); r["net"] = "reachable"
except OSError as e:
    r["net"] = str(e)
try:
    open("/usr/pybox-doctor", "w"); r["rootfs"] = "writable"
except OSError as e:
    r["rootfs"] = e.strerror
r["host_env"] = sorted(k for k in os.environ if k.startswith("PYBOX_DOCTOR"))
print(json.dumps(r))
`

// probe is what selfTest prints.
type probe struct {
	UID     int      `json:"uid"`
	Ifaces  []string `json:"ifaces"`
	Net     string   `json:"net"`
	RootFS  string   `json:"rootfs"`
	HostEnv []string `json:"host_env"`
}

// Run checks a's engine, runtimes, runtime image and code storage, runs
// the isolation probe in a real sandbox (and again under gVisor when the
// daemon has it), writes a line per check on out, and reports whether
// every check passed.
func Run(ctx context.Context, a *app.App, out io.Writer) bool {
	d := &doctor{out: out, ok: true}
	d.run(ctx, a)
	return d.ok
}

type doctor struct {
	out io.Writer
	ok  bool
}

func (d *doctor) line(ok bool, what, detail string) {
	mark := "OK  "
	if !ok {
		mark, d.ok = "FAIL", false
	}
	fmt.Fprintf(d.out, "%s %-22s %s\n", mark, what, detail)
}

func (d *doctor) run(ctx context.Context, a *app.App) {
	v, err := a.Engine.Ping(ctx)
	if errors.Is(err, sandbox.ErrPermission) {
		d.line(false, "docker", err.Error())
		return
	}
	if err != nil {
		d.line(false, "docker", err.Error())
		return
	}
	d.engine(a.Engine.Choice())
	d.line(true, "docker", fmt.Sprintf("engine %s, API %s", v.Server, v.APIVersion))
	d.line(true, "runtimes", strings.Join(v.Runtimes, ", ")+runtimeNote(v.Runtimes, a.Config.Runtime))
	img, found, err := a.Engine.InspectImage(ctx, a.Image)
	if err != nil || !found {
		d.line(false, "runtime image", a.Image+" is missing — run `pybox image build` (or `pybox image build --offline`)")
		return
	}
	d.line(true, "runtime image", fmt.Sprintf("%s (%s, %d MB)", a.Image, app.ShortID(img.ID), img.Size>>20))
	store, err := a.OpenStorage(a.Config.StorageDir)
	if err != nil {
		d.line(false, "code storage", err.Error())
		return
	}
	defer store.Close()
	d.line(true, "code storage", store.Path())
	d.selfTest(ctx, a, a.Sandbox, "")
	d.gvisor(ctx, a, v.Runtimes)
}

// engine says which engine was chosen and why, and where pybox looked.
func (d *doctor) engine(ch engine.Choice) {
	d.line(true, "engine", ch.Why())
	for _, p := range ch.Places() {
		fmt.Fprintf(d.out, "     %-22s %s\n", "", p)
	}
}

// gvisor says whether gVisor's runsc is there and works: the self-test
// again, under runsc. Its absence is no failure (runc is the default).
func (d *doctor) gvisor(ctx context.Context, a *app.App, runtimes []string) {
	if !slices.Contains(runtimes, "runsc") {
		d.line(true, "gvisor", "runsc is not registered with the daemon (optional second wall: see docs/security.md, gVisor, to install it)")
		return
	}
	if a.Config.Runtime == "runsc" {
		d.line(true, "gvisor", "runsc is registered and in use: the self-test above ran under it")
		return
	}
	limits, err := a.Config.Limits()
	if err != nil {
		d.line(false, "gvisor", err.Error())
		return
	}
	sb, err := sandbox.New(sandbox.Config{Engine: a.Engine, Image: a.Image, Runtime: "runsc", Limits: limits, WarmPool: -1,
		RunsDir: filepath.Join(a.Config.StateDir, "runs"), LeaseDir: filepath.Join(a.Config.StateDir, "owners"), Log: a.Log})
	if err != nil {
		d.line(false, "gvisor", err.Error())
		return
	}
	defer sb.Close()
	before := d.ok
	d.selfTest(ctx, a, sb, " (runsc)")
	if d.ok && before {
		d.line(true, "gvisor", "runsc is registered and works (the lines marked runsc); choose it with --runtime runsc (PYBOX_RUNTIME=runsc)")
	}
}

// runtimeNote flags a configured runtime the daemon lacks.
func runtimeNote(have []string, want string) string {
	if want == "" {
		return ""
	}
	for _, r := range have {
		if r == want {
			return " (using " + want + ")"
		}
	}
	return " (configured runtime " + want + " is NOT installed)"
}

// selfTest runs the isolation probe in a real sandbox of sb within two
// seconds (ten under gVisor, whose first start is slower); suffix marks
// its lines.
func (d *doctor) selfTest(ctx context.Context, a *app.App, sb *sandbox.Sandbox, suffix string) {
	line := func(ok bool, what, detail string) { d.line(ok, what+suffix, detail) }
	ws, err := os.MkdirTemp("", "pybox-doctor-")
	if err != nil {
		line(false, "isolation", err.Error())
		return
	}
	defer os.RemoveAll(ws)
	store, err := a.OpenStorage(ws)
	if err != nil {
		line(false, "isolation", err.Error())
		return
	}
	defer store.Close()
	name := storage.NewCodeName("doctor")
	if err := store.Create(name, []byte(selfTest)); err != nil {
		line(false, "isolation", err.Error())
		return
	}
	os.Setenv("PYBOX_DOCTOR_LEAK", "1") // must not reach the sandbox
	start := time.Now()
	timeout := 2 * time.Second
	if suffix != "" {
		timeout = 10 * time.Second
	}
	res, err := sb.Run(ctx, sandbox.Program{Workspace: store.Path(), File: name, Timeout: timeout})
	if err != nil || res.ExitCode != 0 {
		line(false, "isolation", fmt.Sprintf("self-test did not run: %v %s", err, res.Stderr))
		return
	}
	var p probe
	if err := json.Unmarshal([]byte(res.Stdout), &p); err != nil {
		line(false, "isolation", "unreadable self-test output: "+res.Stdout)
		return
	}
	line(p.UID != 0, "non-root", fmt.Sprintf("uid %d", p.UID))
	line(len(p.Ifaces) == 1 && p.Ifaces[0] == "lo" && p.Net != "reachable", "no network", fmt.Sprintf("interfaces %v; connect: %s", p.Ifaces, p.Net))
	line(p.RootFS != "writable", "read-only root", p.RootFS)
	line(len(p.HostEnv) == 0, "clean env", fmt.Sprintf("host variables seen: %d", len(p.HostEnv)))
	line(true, "self-test", fmt.Sprintf("%d ms", time.Since(start).Milliseconds()))
}
