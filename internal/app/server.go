package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/internal/egress"
	"github.com/pybox-dev/pybox/sandbox"
	"github.com/pybox-dev/pybox/tools"
)

// MCPServer makes a's MCP server: its code storage and session folders
// opened, leftovers of an earlier pybox on its state directory removed,
// and its environment made ready in the background (until ctx ends).
// stop releases what it opened.
func (a *App) MCPServer(ctx context.Context) (*mcp.Server, func(), error) {
	c := a.Config
	var closers []func()
	stop := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	fail := func(err error) (*mcp.Server, func(), error) { stop(); return nil, nil, err }
	store, err := a.OpenStorage(c.StorageDir)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, func() { store.Close() })
	sessions, err := a.openSessions()
	if err != nil {
		return fail(err)
	}
	closers = append(closers, func() { sessions.Close() })
	if n, err := a.Sandbox.ReapOrphans(ctx); err != nil {
		a.Log.Warn("could not look for leftover containers", "err", err)
	} else if n > 0 {
		a.Log.Info("removed containers left by a previous pybox", "count", n)
	}
	if !a.hostChecked {
		if err := a.checkSameHost(ctx, store.Path(), sessions.Path(), filepath.Join(c.StateDir, "runs")); err != nil {
			return fail(err)
		}
	}
	// The environment is made ready (image built, packages preinstalled) in
	// the background; when the server stops that work is cancelled.
	readyCtx, stopReady := context.WithCancel(ctx)
	ready := a.newReadiness(readyCtx)
	closers = append(closers, func() { stopReady(); ready.wg.Wait() })
	codeLimit, err := c.CodeLimit()
	if err != nil {
		return fail(err)
	}
	fileLimit, err := c.FileLimit()
	if err != nil {
		return fail(err)
	}
	var modes tools.CodeMode
	cm, err := newCodeMode(c, a.Log)
	if err != nil {
		return fail(err)
	}
	if cm != nil {
		closers = append(closers, cm.Close)
		modes = cm
	}
	srv, err := tools.NewServer(tools.Config{
		Sandbox: a.Sandbox, Storage: store, Sessions: sessions, Scratch: !a.caps.HostFolders, Envs: a.observedEnvs(), Index: a.index, Ready: ready.wait, Notice: a.takeNotice, MaxCodeBytes: codeLimit, MaxInputBytes: codeLimit, MaxFileBytes: fileLimit,
		MaxTimeout: c.MaxTimeout, MaxCalls: c.MaxCalls, Toolset: c.Toolset, Guard: c.LoadedPolicy.Check, GuardRules: c.LoadedPolicy.GuardRules(), CodeMode: modes, Version: c.Version, Log: a.Log, Observe: a.observeRun,
	})
	if err != nil {
		return fail(err)
	}
	return srv, stop, nil
}

// NewTenant is base's pybox for one tenant: the same engine and
// settings, with its own code storage (CODE_STORAGE_DIR/tenants/NAME),
// state directory (sessions, environment, leases, run folders), sandbox
// (its warm pool, programs-at-once and sessions limits) and environment
// manager. Package layers with the same content are shared underneath, as
// images; which ones a tenant's environment uses is its own.
func NewTenant(base *App, name string) (*App, error) {
	cfg := *base.Config
	cfg.StorageDir = filepath.Join(base.Config.StorageDir, "tenants", name)
	cfg.StateDir = filepath.Join(base.Config.StateDir, "tenants", name)
	for _, d := range []string{filepath.Dir(cfg.StorageDir), cfg.StateDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	limits, err := cfg.Limits()
	if err != nil {
		return nil, err
	}
	lists, err := tenantEgress(cfg.TenantEgress)
	if err != nil {
		return nil, err
	}
	if list, ok := lists[name]; ok {
		cfg.EgressAllow = list
	}
	eg, err := cfg.egress()
	if err != nil {
		return nil, err
	}
	// One budget for all the tenant's proxies: its runs at once times a
	// run's connections is no bound a tenant should be able to reach.
	if eg.Shared, err = egress.NewGate(cfg.TenantEgressConns); err != nil {
		return nil, fmt.Errorf("PYBOX_TENANT_EGRESS_CONNECTIONS: %w", err)
	}
	log := base.Log.With("tenant", name)
	vol, err := cfg.storageFS(limits, base.caps.HostFolders, log)
	if err != nil {
		return nil, err
	}
	sb, err := sandbox.New(sandbox.Config{Engine: base.Engine, Backend: base.backend, Image: base.Image, Runtime: cfg.Runtime, User: base.user, Limits: limits, Filesystem: fsOf(vol),
		MaxConcurrent: cfg.MaxConcurrent, QueueWait: cfg.QueueWait, MaxSessions: cfg.MaxSessions, SessionTTL: cfg.SessionTTL,
		WarmPool: warmPool(cfg.WarmPool), RunsDir: filepath.Join(cfg.StateDir, "runs"), StagingDir: filepath.Join(cfg.StateDir, "staging"), LeaseDir: filepath.Join(cfg.StateDir, "owners"),
		StorageDirs: cfg.storageDirs(), Egress: eg, Log: log})
	if err != nil {
		closeVolume(vol, log)
		return nil, err
	}
	a := &App{Config: &cfg, Log: log, Engine: base.Engine, backend: base.backend, caps: base.caps, Sandbox: sb, Image: base.Image, user: base.user,
		progress: base.progress, tenant: name, hostChecked: base.hostChecked, volume: vol}
	if err := a.newManager(); err != nil {
		sb.Close()
		closeVolume(vol, log)
		return nil, err
	}
	return a, nil
}

// Health says whether a can run programs now (sandbox.Health: Docker
// answers and has the runtime image; a cluster's API server lists pybox's
// pods), and a report that says which part failed.
func (a *App) Health(ctx context.Context) (report map[string]string, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return sandbox.Health(ctx, a.backend, a.Image)
}

// Tenant is whose a is over HTTP with tokens ("" otherwise).
func (a *App) Tenant() string { return a.tenant }

// Observe has a's runs and installs counted by o (set it before
// MCPServer).
func (a *App) Observe(o Observer) { a.observer = o }

// CheckRoots checks, once, that the folders every owner's are under (code
// storage and the state directory) are the Docker host's (see
// checkSameHost); MCPServer then checks no tenant's own.
func (a *App) CheckRoots(ctx context.Context) error {
	if err := a.checkSameHost(ctx, a.Config.StorageDir, a.Config.StateDir); err != nil {
		return err
	}
	a.hostChecked = true
	return nil
}

// PoolReady is how many warm containers a has ready.
func (a *App) PoolReady() int { return a.Sandbox.PoolReady() }

// Shutdown ends a's runs and sessions at once (the server is stopping,
// or the tenant was removed); CloseTenant or Close then release the rest.
func (a *App) Shutdown() { a.Sandbox.Shutdown() }
