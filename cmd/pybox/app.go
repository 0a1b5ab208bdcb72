package main

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

// app is the wired runtime shared by serve, run and bench.
type app struct {
	cfg      *config
	log      *slog.Logger
	engine   *engine.Client
	backend  sandbox.Backend // nil: Docker (engine); else Kubernetes
	sandbox  *sandbox.Sandbox
	envs     *images.Manager
	inst     *images.Installer
	index    images.Index
	image    string
	user     string          // uid:gid programs run as (config.sandboxUser)
	progress io.Writer       // where long work (image builds, installs) reports
	tenant   string          // over HTTP with tokens: whose this app is ("" otherwise)
	volume   *quotafs.Volume // the owner's folders on a filesystem of their own; nil: metered
	metrics  *metrics        // over HTTP: where runs and installs are counted; nil: not counted
	// hostChecked: its folders are under ones already found to be the
	// Docker host's (serve --http checks the roots once, at start).
	hostChecked bool
	noticeMu    sync.Mutex
	notice      []string // said once, with the next tool result (a failed preinstall, adopted host settings)
}

// addNotice logs msg and keeps it for the model's next tool result.
func (a *app) addNotice(msg string) {
	a.noticeMu.Lock()
	defer a.noticeMu.Unlock()
	a.notice = append(a.notice, msg)
}

// takeNotice returns the pending notices, once.
func (a *app) takeNotice() string {
	a.noticeMu.Lock()
	defer a.noticeMu.Unlock()
	s := strings.Join(a.notice, "\n")
	a.notice = nil
	return s
}

// newApp validates the configuration and connects the parts (ctx bounds
// the connection to a Kubernetes cluster and its start checks).
// Logs and progress go to stderr.
func newApp(ctx context.Context, c *config, stderr io.Writer) (*app, error) {
	adopted := c.adoptHostSettings()
	if err := c.validate(); err != nil {
		return nil, err
	}
	log, err := c.logger(stderr)
	if err != nil {
		return nil, err
	}
	limits, err := c.limits()
	if err != nil {
		return nil, err
	}
	image, err := c.image()
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
		if err := c.policyRuntime(eng, log); err != nil {
			eng.Close()
			return nil, err
		}
	}
	user := c.sandboxUser()
	eg, err := c.egress()
	if err == nil && backend != nil && !eg.Allow.Empty() {
		err = sandbox.ErrNoEgress
	}
	if err != nil {
		eng.Close()
		return nil, err
	}
	var vol *quotafs.Volume
	if c.serving && c.TokensFile == "" && !c.inMemory { // with tokens, each tenant has its own (newTenantApp)
		if vol, err = c.storageFS(limits, backend != nil, log); err != nil {
			eng.Close()
			return nil, err
		}
	}
	sb, err := sandbox.New(sandbox.Config{Engine: eng, Backend: backend, Image: image, Runtime: c.Runtime, User: user, Limits: limits, Filesystem: fsOf(vol),
		SharedUID:     backend != nil, // pods keep the one user: a cluster's storage story is its own
		MaxConcurrent: c.MaxConcurrent, QueueWait: c.QueueWait, MaxSessions: c.MaxSessions, SessionTTL: c.SessionTTL,
		WarmPool: warmPool(c.WarmPool), RunsDir: c.runsDir(), LeaseDir: filepath.Join(c.StateDir, "owners"),
		StorageDirs: c.storageDirs(), Egress: eg, Log: log})
	if err != nil {
		closeVolume(vol, log)
		eng.Close()
		return nil, err
	}
	a := &app{cfg: c, log: log, engine: eng, backend: backend, sandbox: sb, image: image, user: user, progress: stderr, volume: vol}
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
func (a *app) newManager() error {
	idx, err := a.cfg.index()
	if err != nil {
		return err
	}
	a.index = idx
	inst := &images.Installer{Engine: a.engine, Owner: a.sandbox.Owner(), Index: idx, Tenant: a.tenant, Timeout: a.cfg.InstallTime, Log: a.log}
	if a.backend != nil {
		inst.Refuse = errInstallOnKubernetes
	}
	a.inst = inst
	a.envs, err = images.NewManager(images.ManagerConfig{
		EnsureRuntime: a.ensureRuntime, Installer: inst, Prober: a.sandbox,
		Policy: images.RequirementPolicy{AllowURLs: a.cfg.AllowURLReqs}, AllowedImages: a.cfg.allowedImages(), Log: a.log,
	})
	return err
}

// start makes the configured environment usable: the runtime image, the
// saved (or configured) environment, and PREINSTALLED_PACKAGES. With
// persist, the active environment is loaded from and saved to the state dir.
func (a *app) start(ctx context.Context, persist bool) error {
	if persist {
		a.envs.SetStatePath(filepath.Join(a.cfg.StateDir, "environment.json"))
	}
	if err := a.envs.Start(ctx, a.cfg.initialEnv()); err != nil {
		return err
	}
	if pre := a.cfg.preinstalled(); len(pre) > 0 {
		fmt.Fprintf(a.progress, "pybox: making sure PREINSTALLED_PACKAGES are installed: %s\n", strings.Join(pre, " "))
		if _, err := a.envs.Install(ctx, pre); err != nil {
			if errors.Is(err, engine.ErrUnreachable) || ctx.Err() != nil {
				return fmt.Errorf("PREINSTALLED_PACKAGES: %w", err) // tried again once Docker answers
			}
			// Reported once, clearly; programs run without them rather than not at all.
			msg := fmt.Sprintf("PREINSTALLED_PACKAGES (%s) could not be installed, so programs run without them: %v. "+
				"Fix the setting (or the package index: PYBOX_INDEX_URL, PYBOX_WHEELHOUSE) and restart, or install them with install_dependencies.",
				strings.Join(pre, " "), err)
			a.log.Error("PREINSTALLED_PACKAGES could not be installed; programs run without them", "packages", strings.Join(pre, " "), "err", err)
			a.addNotice(msg)
		}
	}
	return nil
}

// Close stops the installs under way and waits for them, ends every
// session (removing its container), and closes the Docker client.
func (a *app) Close() error {
	a.closeTenant()
	return a.engine.Close()
}

// closeTenant stops a's installs under way (waiting for them), then its
// sessions and containers; the engine stays (tenants share it).
func (a *app) closeTenant() {
	if a.envs != nil {
		a.envs.Close()
	}
	if a.inst != nil {
		a.inst.Close()
	}
	a.sandbox.Close()
	closeVolume(a.volume, a.log)
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
func (c *config) storageDirs() []string {
	if c.inMemory {
		return nil
	}
	return []string{c.StorageDir, filepath.Join(c.StateDir, "sessions")}
}

// runsDir is where stateless runs get their output folders ("" in memory:
// none).
func (c *config) runsDir() string {
	if c.inMemory {
		return ""
	}
	return filepath.Join(c.StateDir, "runs")
}

// openSessions opens the folder of session workspaces, in the state dir:
// outside code storage, so no stateless run can reach a session's files or
// swap its folder for a symlink before it is mounted.
func (a *app) openSessions() (*storage.Dir, error) {
	return a.openStorage(filepath.Join(a.cfg.StateDir, "sessions"))
}

// openStorage opens a directory the sandbox user (a.user, "uid:gid") can
// write to. Run as root, pybox gives the sandbox user the folders it
// creates, and an existing folder only when root owns it: a folder of a
// regular user is never given away (programs run as its owner instead:
// see sandboxUser). When each container runs as a uid of its own (see
// sandbox.Config.SharedUID), the folder is shared with the sandbox user's
// group (storage.Dir.Share).
func (a *app) openStorage(path string) (*storage.Dir, error) {
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
	case a.sandbox.OwnUIDs():
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
func (c *config) sandboxUser() string {
	if !chownsForSandbox || os.Geteuid() != 0 {
		return sandbox.SandboxUser()
	}
	if uid, gid, ok := fileOwner(c.StorageDir); ok && uid != 0 && !c.inMemory {
		return fmt.Sprintf("%d:%d", uid, gid)
	}
	return images.SandboxUser
}

// ensureRuntime makes sure the runtime image of variant exists, building
// it as the build setting says, with progress on the app's progress writer.
func (a *app) ensureRuntime(ctx context.Context, variant string) error {
	if a.backend != nil {
		return nil // the cluster pulls the image (PYBOX_IMAGE); pybox cannot build it there
	}
	tag := images.Tag(variant)
	_, found, err := a.engine.InspectImage(ctx, tag)
	switch {
	case err != nil:
		return err
	case a.cfg.Build == "never" && !found:
		return fmt.Errorf("runtime image %s is missing and building is off (PYBOX_BUILD=never): run `pybox image build`", tag)
	case a.cfg.Build == "never" || (found && a.cfg.Build != "auto"):
		return nil
	}
	b := &images.Builder{Engine: a.engine, Log: a.log, Progress: a.progress, Mirror: a.cfg.Mirror}
	if a.cfg.Build == "auto" {
		_, err = b.Ensure(ctx, variant)
		return err
	}
	_, err = b.Build(ctx, images.BuildOptions{Variant: variant, Offline: a.cfg.Build == "offline"})
	return err
}

// readiness builds the runtime image at most once at a time, in the
// background on the server's context, and lets each call wait for it.
// A failed attempt (say, Docker was down) is retried by the next call.
type readiness struct {
	app    *app
	ctx    context.Context // the server's: a cancelled call must not stop a build
	flight singleflight.Group
	ok     atomic.Bool
	wg     sync.WaitGroup
}

func (a *app) newReadiness(ctx context.Context) *readiness {
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
		err := r.app.start(r.ctx, true)
		if err != nil {
			r.app.log.Error("environment not ready", "image", r.app.image, "err", err)
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

// backend connects the configured non-Docker backend (nil for Docker).
func (c *config) backend(ctx context.Context, limits sandbox.Limits, log *slog.Logger) (sandbox.Backend, error) {
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
	image, err := c.image()
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
func (c *config) policyRuntime(eng *engine.Client, log *slog.Logger) error {
	if c.policy == nil {
		return nil
	}
	want := c.policy.Runtime
	name := cmp.Or(want.Require, want.Prefer)
	switch {
	case name == "":
		return nil
	case c.Runtime != "":
		if want.Require != "" && c.Runtime != want.Require {
			return fmt.Errorf("policy %s requires the %s runtime, but %s was chosen (--runtime or PYBOX_RUNTIME)", c.policy.Name, want.Require, c.Runtime)
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
			"policy", c.policy.Name, "runtime", name)
	case slices.Contains(v.Runtimes, name):
		c.Runtime = name
		log.Info("sandboxes run under the runtime the policy asks for", "policy", c.policy.Name, "runtime", name)
	case want.Require != "":
		return fmt.Errorf("policy %s requires the %s runtime, which the Docker daemon does not have (it has %s): install it (see docs/security.md, gVisor) or choose another policy",
			c.policy.Name, name, strings.Join(v.Runtimes, ", "))
	default:
		log.Warn("the policy prefers a runtime the Docker daemon does not have: sandboxes run under its default runtime; install it for a second wall (see docs/security.md, gVisor)",
			"policy", c.policy.Name, "runtime", name, "daemon_runtimes", strings.Join(v.Runtimes, ","))
	}
	return nil
}
