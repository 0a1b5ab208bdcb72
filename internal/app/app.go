package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/pybox-dev/pybox/images"
	"github.com/pybox-dev/pybox/internal/engine"
	"github.com/pybox-dev/pybox/internal/kube"
	"github.com/pybox-dev/pybox/internal/quotafs"
	"github.com/pybox-dev/pybox/internal/storage"
	"github.com/pybox-dev/pybox/sandbox"
)

// App is one owner's wired pybox, shared by serve, run, eval and bench:
// its sandbox, environment manager and installer over one engine. Its
// exported fields are set by New (or NewTenant) and only read afterwards.
type App struct {
	Config    *Config
	Log       *slog.Logger
	Engine    *engine.Client
	Sandbox   *sandbox.Sandbox
	Envs      *images.Manager
	Installer *images.Installer
	Image     string // the runtime image in force

	backend  sandbox.Backend      // where sandboxes run: Docker (over Engine) or a cluster
	caps     sandbox.Capabilities // what backend can do (host folders, local images, egress)
	index    images.Index
	user     string          // uid:gid programs run as (config.sandboxUser)
	progress io.Writer       // where long work (image builds, installs) reports
	tenant   string          // over HTTP with tokens: whose this app is ("" otherwise)
	volume   *quotafs.Volume // the owner's folders on a filesystem of their own; nil: metered
	observer Observer        // over HTTP: where runs and installs are counted; nil: not counted
	// hostChecked: its folders are under ones already found to be the
	// Docker host's (serve --http checks the roots once, at start).
	hostChecked bool
	noticeMu    sync.Mutex
	notice      []string // said once, with the next tool result (a failed preinstall, adopted host settings)
}

// addNotice logs msg and keeps it for the model's next tool result.
func (a *App) addNotice(msg string) {
	a.noticeMu.Lock()
	defer a.noticeMu.Unlock()
	a.notice = append(a.notice, msg)
}

// takeNotice returns the pending notices, once.
func (a *App) takeNotice() string {
	a.noticeMu.Lock()
	defer a.noticeMu.Unlock()
	s := strings.Join(a.notice, "\n")
	a.notice = nil
	return s
}

// New validates the configuration and connects the parts (ctx bounds
// the connection to a Kubernetes cluster and its start checks).
// Logs and progress go to stderr. Close releases what it holds.
func New(ctx context.Context, c *Config, stderr io.Writer) (*App, error) {
	adopted := c.adoptHostSettings()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	log, err := c.Logger(stderr)
	if err != nil {
		return nil, err
	}
	limits, err := c.Limits()
	if err != nil {
		return nil, err
	}
	image, err := c.ImageRef()
	if err != nil {
		return nil, err
	}
	eng, err := engine.New(log)
	if err != nil {
		return nil, err
	}
	backend, err := c.backend(ctx, limits, log)
	if err != nil {
		eng.Close()
		return nil, err
	}
	if backend == nil {
		backend = sandbox.Docker(eng)
	}
	caps := sandbox.CapabilitiesOf(backend)
	if caps.LocalImages { // the engine's runtimes are those a policy chooses among
		if err := c.policyRuntime(eng, log); err != nil {
			eng.Close()
			return nil, err
		}
	}
	user := c.sandboxUser()
	eg, err := c.egress()
	if err == nil && !caps.Egress && !eg.Allow.Empty() {
		err = sandbox.ErrNoEgress
	}
	if err != nil {
		eng.Close()
		return nil, err
	}
	var vol *quotafs.Volume
	if c.Serving && c.TokensFile == "" && !c.InMemory { // with tokens, each tenant has its own (newTenantApp)
		if vol, err = c.storageFS(limits, caps.HostFolders, log); err != nil {
			eng.Close()
			return nil, err
		}
	}
	sb, err := sandbox.New(sandbox.Config{Engine: eng, Backend: backend, Image: image, Runtime: c.Runtime, User: user, Limits: limits, Filesystem: fsOf(vol),
		MaxConcurrent: c.MaxConcurrent, QueueWait: c.QueueWait, MaxSessions: c.MaxSessions, SessionTTL: c.SessionTTL,
		WarmPool: warmPool(c.WarmPool), RunsDir: c.runsDir(), StagingDir: c.stagingDir(), LeaseDir: filepath.Join(c.StateDir, "owners"),
		StorageDirs: c.storageDirs(), Egress: eg, Log: log})
	if err != nil {
		closeVolume(vol, log)
		eng.Close()
		return nil, err
	}
	a := &App{Config: c, Log: log, Engine: eng, backend: backend, caps: caps, Sandbox: sb, Image: image, user: user, progress: stderr, volume: vol}
	if err := a.newManager(); err != nil {
		sb.Close() // ends its lease
		closeVolume(vol, log)
		eng.Close()
		return nil, err
	}
	for _, n := range adopted {
		log.Info("a setting written for a host-run executor was adopted", "note", n)
		a.addNotice(n)
	}
	return a, nil
}

// newManager wires the environment manager and its installer.
func (a *App) newManager() error {
	idx, err := a.Config.Index()
	if err != nil {
		return err
	}
	a.index = idx
	layers, err := a.Config.layerBytes()
	if err != nil {
		return err
	}
	inst := &images.Installer{Engine: a.Engine, Owner: a.Sandbox.Owner(), Index: idx, Tenant: a.tenant, Timeout: a.Config.InstallTime, LayerBytes: layers, Log: a.Log,
		TempDir: a.Sandbox.TempDir}
	if !a.caps.LocalImages { // no layer it commits could be run
		inst.Refuse = errInstallOnKubernetes
	}
	a.Installer = inst
	a.Envs, err = images.NewManager(images.ManagerConfig{
		EnsureRuntime: a.EnsureRuntime, Installer: inst, Prober: a.Sandbox,
		Policy: images.RequirementPolicy{AllowURLs: a.Config.AllowURLReqs}, AllowedImages: a.Config.allowedImages(), Log: a.Log,
	})
	return err
}

// Start makes the configured environment usable: the runtime image, the
// saved (or configured) environment, and PREINSTALLED_PACKAGES. With
// persist, the active environment is loaded from and saved to the state dir.
func (a *App) Start(ctx context.Context, persist bool) error {
	if persist {
		a.Envs.SetStatePath(filepath.Join(a.Config.StateDir, "environment.json"))
	}
	if err := a.Envs.Start(ctx, a.Config.InitialEnv()); err != nil {
		return err
	}
	if pre := a.Config.preinstalled(); len(pre) > 0 {
		fmt.Fprintf(a.progress, "pybox: making sure PREINSTALLED_PACKAGES are installed: %s\n", strings.Join(pre, " "))
		if _, err := a.Envs.Install(ctx, pre); err != nil {
			if errors.Is(err, engine.ErrUnreachable) || ctx.Err() != nil {
				return fmt.Errorf("PREINSTALLED_PACKAGES: %w", err) // tried again once Docker answers
			}
			// Reported once, clearly; programs run without them rather than not at all.
			msg := fmt.Sprintf("PREINSTALLED_PACKAGES (%s) could not be installed, so programs run without them: %v. "+
				"Fix the setting (or the package index: PYBOX_INDEX_URL, PYBOX_WHEELHOUSE) and restart, or install them with install_dependencies.",
				strings.Join(pre, " "), err)
			a.Log.Error("PREINSTALLED_PACKAGES could not be installed; programs run without them", "packages", strings.Join(pre, " "), "err", err)
			a.addNotice(msg)
		}
	}
	return nil
}

// Close stops the installs under way and waits for them, ends every
// session (removing its container), and closes the Docker client.
func (a *App) Close() error {
	a.CloseTenant()
	return a.Engine.Close()
}

// CloseTenant stops a's installs under way (waiting for them), then its
// sessions and containers; the engine stays (tenants share it).
func (a *App) CloseTenant() {
	if a.Envs != nil {
		a.Envs.Close()
	}
	if a.Installer != nil {
		a.Installer.Close()
	}
	a.Sandbox.Close()
	closeVolume(a.volume, a.Log)
}

// fsOf is vol as the sandbox's Filesystem (nil stays nil).
func fsOf(vol *quotafs.Volume) sandbox.Filesystem {
	if vol == nil {
		return nil
	}
	return vol
}

// closeVolume unmounts the owner's filesystem (unless another server on
// the same state directory still uses it); safe on nil.
func closeVolume(vol *quotafs.Volume, log *slog.Logger) {
	if vol == nil {
		return
	}
	if err := vol.Close(); err != nil {
		log.Warn("the owner's quota filesystem was not unmounted", "err", err)
	}
}

// storageDirs are the folders that count against the storage quota with
// the run output folders: code storage and the sessions folder (over
// HTTP, a tenant's own); none in memory.
func (c *Config) storageDirs() []string {
	if c.InMemory {
		return nil
	}
	return []string{c.StorageDir, filepath.Join(c.StateDir, "sessions")}
}

// runsDir is where stateless runs get their output folders ("" in memory:
// none).
func (c *Config) runsDir() string {
	if c.InMemory {
		return ""
	}
	return filepath.Join(c.StateDir, "runs")
}

// stagingDir is where installs stage their files ("" in memory: the
// system's temporary folder).
func (c *Config) stagingDir() string {
	if c.InMemory {
		return ""
	}
	return filepath.Join(c.StateDir, "staging")
}

// openSessions opens the folder of session workspaces, in the state dir:
// outside code storage, so no stateless run can reach a session's files or
// swap its folder for a symlink before it is mounted.
func (a *App) openSessions() (*storage.Dir, error) {
	return a.OpenStorage(filepath.Join(a.Config.StateDir, "sessions"))
}

// OpenStorage opens a directory the sandbox user (a.user, "uid:gid") can
// write to. Run as root, pybox gives the sandbox user the folders it
// creates, and an existing folder only when root owns it: a folder of a
// regular user is never given away (programs run as its owner instead:
// see sandboxUser). When each container runs as a uid of its own (see
// sandbox.Config.SharedUID), the folder is shared with the sandbox user's
// group (storage.Dir.Share).
func (a *App) OpenStorage(path string) (*storage.Dir, error) {
	ownerUID, _, owned := fileOwner(path)
	dir, err := storage.Open(path)
	if err != nil {
		return nil, err
	}
	if !chownsForSandbox || os.Geteuid() != 0 {
		return dir, nil
	}
	var uid, gid int
	if _, err := fmt.Sscanf(a.user, "%d:%d", &uid, &gid); err != nil {
		dir.Close()
		return nil, fmt.Errorf("sandbox user %q: %w", a.user, err)
	}
	switch {
	case a.Sandbox.OwnUIDs() && a.caps.HostFolders: // no host folder shared otherwise
		err = dir.Share(uid, gid)
	case owned && ownerUID != 0:
		dir.SetNewOwner(uid, gid) // the folders pybox makes in it
	default:
		err = dir.SetOwner(uid, gid)
	}
	if err != nil {
		dir.Close()
		return nil, err
	}
	return dir, nil
}

// sandboxUser is the uid:gid programs run as: the server's own when it is
// not root; as root, the owner of an existing code storage folder when that
// is a regular user (so files programs write there are theirs, and the
// folder is never given away), else the image's unprivileged user (in
// memory, always: no code storage is used).
func (c *Config) sandboxUser() string {
	if !chownsForSandbox || os.Geteuid() != 0 {
		return sandbox.SandboxUser()
	}
	if uid, gid, ok := fileOwner(c.StorageDir); ok && uid != 0 && !c.InMemory {
		return fmt.Sprintf("%d:%d", uid, gid)
	}
	return images.SandboxUser
}

// EnsureRuntime makes sure the runtime image of variant exists, building
// it as the build setting says, with progress on the app's progress writer.
func (a *App) EnsureRuntime(ctx context.Context, variant string) error {
	if !a.caps.LocalImages {
		return nil // the cluster pulls the image (PYBOX_IMAGE); pybox cannot build it there
	}
	tag := images.Tag(variant)
	_, found, err := a.Engine.InspectImage(ctx, tag)
	switch {
	case err != nil:
		return err
	case a.Config.Build == "never" && !found:
		return fmt.Errorf("runtime image %s is missing and building is off (PYBOX_BUILD=never): run `pybox image build`", tag)
	case a.Config.Build == "never" || (found && a.Config.Build != "auto"):
		return nil
	}
	b := &images.Builder{Engine: a.Engine, Log: a.Log, Progress: a.progress, Mirror: a.Config.Mirror}
	if a.Config.Build == "auto" {
		_, err = b.Ensure(ctx, variant)
		return err
	}
	_, err = b.Build(ctx, images.BuildOptions{Variant: variant, Offline: a.Config.Build == "offline"})
	return err
}

// readiness builds the runtime image at most once at a time, in the
// background on the server's context, and lets each call wait for it.
// A failed attempt (say, Docker was down) is retried by the next call.
type readiness struct {
	app    *App
	ctx    context.Context // the server's: a cancelled call must not stop a build
	flight singleflight.Group
	ok     atomic.Bool
	wg     sync.WaitGroup
}

func (a *App) newReadiness(ctx context.Context) *readiness {
	r := &readiness{app: a, ctx: ctx}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		_ = r.wait(ctx) // an error is logged and retried on the first call
	}()
	return r
}

// wait blocks until the environment is ready or ctx ends.
func (r *readiness) wait(ctx context.Context) error {
	if r.ok.Load() {
		return nil
	}
	ch := r.flight.DoChan("ensure", func() (any, error) {
		err := r.app.Start(r.ctx, true)
		if err != nil {
			r.app.Log.Error("environment not ready", "image", r.app.Image, "err", err)
		}
		r.ok.Store(err == nil)
		return nil, err
	})
	select {
	case res := <-ch:
		if res.Err != nil && !errors.Is(res.Err, engine.ErrUnreachable) {
			return fmt.Errorf("the Python environment is not ready: %w", res.Err)
		}
		return res.Err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// warmPool maps the setting (0 = off) to sandbox.Config's (0 = default).
func warmPool(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}

// errInstallOnKubernetes: the Kubernetes backend cannot commit a container
// into an image layer the cluster could pull.
var errInstallOnKubernetes = errors.New("installing packages is not available on the Kubernetes backend: pods run images the cluster pulls, " +
	"and pybox cannot build one there. Build an image with the packages (for example `pybox image build`, then a Dockerfile FROM it " +
	"that installs them), push it to a registry the cluster pulls from, and set PYBOX_IMAGE to it")

// backend connects the configured non-Docker backend (nil for Docker:
// New makes it over the engine).
func (c *Config) backend(ctx context.Context, limits sandbox.Limits, log *slog.Logger) (sandbox.Backend, error) {
	if c.Backend != "kubernetes" {
		return nil, nil
	}
	connect, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	kb, err := kube.New(connect, kube.Config{Kubeconfig: c.Kubeconfig, Namespace: c.K8sNamespace, WorkspaceBytes: limits.WorkspaceBytes,
		OwnerPod: os.Getenv("POD_NAME"), OwnerUID: os.Getenv("POD_UID"), OwnerNamespace: os.Getenv("POD_NAMESPACE"), RuntimeClass: c.Runtime, Log: log})
	if err != nil {
		return nil, err
	}
	log.Info("sandboxes run as Kubernetes pods", "namespace", kb.Namespace())
	image, err := c.ImageRef()
	if err != nil {
		return nil, err
	}
	if err := c.checkCluster(ctx, kb, image, log); err != nil {
		return nil, err
	}
	return sandbox.Kubernetes(kb), nil
}

// policyRuntime applies the policy's runtime choice when no flag or
// variable chose one: a preferred runtime is used when the daemon has it
// (else its default, with a warning); a required one must be there.
func (c *Config) policyRuntime(eng *engine.Client, log *slog.Logger) error {
	if c.LoadedPolicy == nil {
		return nil
	}
	want := c.LoadedPolicy.Runtime
	name := cmp.Or(want.Require, want.Prefer)
	switch {
	case name == "":
		return nil
	case c.Runtime != "":
		if want.Require != "" && c.Runtime != want.Require {
			return fmt.Errorf("policy %s requires the %s runtime, but %s was chosen (--runtime or PYBOX_RUNTIME)", c.LoadedPolicy.Name, want.Require, c.Runtime)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, err := eng.Ping(ctx)
	switch {
	case err != nil && want.Require != "":
		c.Runtime = want.Require // runs say so clearly if the daemon lacks it once it answers
	case err != nil:
		log.Warn("the policy prefers a runtime, but the Docker daemon did not answer to say whether it has it: sandboxes use its default runtime",
			"policy", c.LoadedPolicy.Name, "runtime", name)
	case slices.Contains(v.Runtimes, name):
		c.Runtime = name
		log.Info("sandboxes run under the runtime the policy asks for", "policy", c.LoadedPolicy.Name, "runtime", name)
	case want.Require != "":
		return fmt.Errorf("policy %s requires the %s runtime, which the Docker daemon does not have (it has %s): install it (see docs/security.md, gVisor) or choose another policy",
			c.LoadedPolicy.Name, name, strings.Join(v.Runtimes, ", "))
	default:
		log.Warn("the policy prefers a runtime the Docker daemon does not have: sandboxes run under its default runtime; install it for a second wall (see docs/security.md, gVisor)",
			"policy", c.LoadedPolicy.Name, "runtime", name, "daemon_runtimes", strings.Join(v.Runtimes, ","))
	}
	return nil
}
