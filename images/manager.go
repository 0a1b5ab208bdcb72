package images

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"

	"golang.org/x/sync/semaphore"
	"golang.org/x/sync/singleflight"

	"github.com/pybox-dev/pybox/internal/engine"
)

// Prober runs a short Python snippet in a sandbox from image with python
// and returns its standard output. Implemented by *sandbox.Sandbox.
type Prober interface {
	Probe(ctx context.Context, image string, python []string, code string) (string, error)
}

// ManagerConfig wires a Manager.
type ManagerConfig struct {
	// EnsureRuntime makes sure the runtime image of a variant exists
	// (building it if the configuration allows).
	EnsureRuntime func(ctx context.Context, variant string) error
	Installer     *Installer        // runs installs
	Prober        Prober            // checks interpreters and lists installed packages
	StatePath     string            // state file; "" = the environment is not persisted
	Policy        RequirementPolicy // what install specs may contain
	// AllowedImages are the images, besides pybox's runtime images and the
	// starting environment's, that an environment may start from: full
	// references (PYBOX_ALLOWED_IMAGES). Nil allows no other image.
	AllowedImages []string
	Log           *slog.Logger // nil discards
}

// Manager holds the active environment: it starts it, switches it,
// installs into it and persists it. Safe for concurrent use.
type Manager struct {
	cfg     ManagerConfig
	log     *slog.Logger
	origin  string
	allowed allowlist
	mu      sync.Mutex // guards active and known
	active  Environment
	known   map[string]Environment
	changes *semaphore.Weighted // one environment change (install, configure) at a time
	flight  singleflight.Group  // identical concurrent install requests
	pkgs    packageCache
	// Installs outlive the call that asked (a cancelled call must not throw
	// away a half-built layer others wait for) but not the manager: they
	// run on ctx, which Close cancels, and Close waits for them.
	ctx      context.Context
	stop     context.CancelFunc
	closeMu  sync.Mutex
	closed   bool
	installs sync.WaitGroup
}

// NewManager returns a Manager; call Start before use.
func NewManager(cfg ManagerConfig) (*Manager, error) {
	if cfg.EnsureRuntime == nil || cfg.Installer == nil || cfg.Prober == nil {
		return nil, errors.New("environment manager: runtime ensurer, installer and prober are required")
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	allowed, err := newAllowlist(cfg.AllowedImages)
	if err != nil {
		return nil, err
	}
	m := &Manager{cfg: cfg, log: log, allowed: allowed, changes: semaphore.NewWeighted(1), pkgs: packageCache{m: map[string]listing{}}}
	m.ctx, m.stop = context.WithCancel(context.Background())
	return m, nil
}

// Close stops the installs under way (their containers are removed) and
// waits for them.
func (m *Manager) Close() {
	m.closeMu.Lock()
	m.closed = true
	m.closeMu.Unlock()
	m.stop()
	m.installs.Wait()
}

// errManagerClosed: the server is stopping; no install starts.
var errManagerClosed = errors.New("the server is stopping: no install starts")

// owned runs f as an install the manager owns (see Close).
func (m *Manager) owned(f func() (InstallResult, error)) (InstallResult, error) {
	m.closeMu.Lock()
	if m.closed {
		m.closeMu.Unlock()
		return InstallResult{}, errManagerClosed
	}
	m.installs.Add(1)
	m.closeMu.Unlock()
	defer m.installs.Done()
	return f()
}

// SetStatePath makes the manager load and save the active environment at
// path. Call it before Start.
func (m *Manager) SetStatePath(path string) { m.cfg.StatePath = path }

// Active returns the active environment.
func (m *Manager) Active() Environment {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.active
}

// Start activates the saved environment when it grew from the same
// configuration as initial, else initial itself, making sure its image exists.
func (m *Manager) Start(ctx context.Context, initial Environment) error {
	initial, err := initial.Normalize()
	if err != nil {
		return err
	}
	m.origin = origin(initial)
	m.allowed.add(initial.BaseImage) // the operator's own choice
	env, restored := initial, false
	if saved, ok := m.saved(ctx); ok {
		env, restored = saved, true
	} else if prev, ok := m.lookup(ctx, initial); ok {
		env, restored = prev, true
	}
	err = m.adopt(ctx, &env)
	if restored && IsBadEnvironment(err) { // a saved environment failing the check is dropped
		m.log.Warn("the saved environment is not usable; starting from the configured one", "err", err)
		env = initial
		err = m.adopt(ctx, &env)
	}
	if err != nil {
		return err
	}
	m.persist(env)
	m.set(env)
	return nil
}

// adopt resolves env's image and, unless an earlier check recorded its
// interpreter or pybox built it, verifies that it is CPython.
func (m *Manager) adopt(ctx context.Context, env *Environment) error {
	if err := m.resolve(ctx, env); err != nil {
		return err
	}
	if env.Executable == "" && env.ownRuntime() {
		env.Executable = VenvPython // the image build checks this venv's interpreter
	}
	if env.Executable != "" {
		return nil
	}
	return m.verify(ctx, env)
}

// saved returns the persisted environment when it applies and its image exists.
func (m *Manager) saved(ctx context.Context) (Environment, bool) {
	if m.cfg.StatePath == "" {
		return Environment{}, false
	}
	st, ok, err := loadState(m.cfg.StatePath)
	if err != nil {
		m.log.Warn("ignoring environment state", "err", err)
		return Environment{}, false
	}
	m.mu.Lock()
	m.known = st.Known
	m.mu.Unlock()
	if !ok || st.Origin != m.origin {
		return Environment{}, false
	}
	if _, found, err := inspectRef(ctx, m.Engine(), st.Environment.Image); err != nil || !found {
		m.log.Warn("saved environment's image is gone; starting from the configured one", "image", st.Environment.Image)
		return Environment{}, false
	}
	return st.Environment, true
}

// resolve makes sure env's image exists (building a runtime image when the
// environment is based on one) and records its ID.
func (m *Manager) resolve(ctx context.Context, env *Environment) error {
	if env.Variant != "" && env.Image == env.BaseImage {
		if err := m.cfg.EnsureRuntime(ctx, env.Variant); err != nil {
			if errors.Is(err, engine.ErrUnreachable) || ctx.Err() != nil {
				return err
			}
			// The model can act on this (pick another variant, ask for a build).
			return fmt.Errorf("%w: the %s runtime image is not available: %w", errBadEnv, env.Variant, err)
		}
	}
	img, err := m.authorize(ctx, *env)
	if err != nil {
		return err
	}
	env.ImageID = img.ID
	return nil
}

// authorize returns env's image when the environment may use it: its base
// is on the allowlist or a package layer of this tenant's, and its current
// image, when another, is a package layer of this tenant's. References are
// resolved only as such, never as image ID prefixes.
func (m *Manager) authorize(ctx context.Context, env Environment) (engine.Image, error) {
	for _, ref := range []string{env.BaseImage, env.Image} {
		if _, err := NormalizeRef(ref); err != nil {
			return engine.Image{}, fmt.Errorf("%w (%w)", notAllowedError(ref), err)
		}
	}
	img, found, err := inspectRef(ctx, m.Engine(), env.Image)
	if err != nil {
		return engine.Image{}, err
	}
	layer := found && ownLayer(img, m.cfg.Installer.Tenant)
	if !m.allowed.allows(env.BaseImage) && !(env.Image == env.BaseImage && layer) {
		return engine.Image{}, notAllowedError(env.BaseImage)
	}
	if env.Image != env.BaseImage && found && !layer {
		return engine.Image{}, notAllowedError(env.Image)
	}
	if !found {
		return engine.Image{}, fmt.Errorf("%w: image %s does not exist locally (pull or build it first)", errBadEnv, env.Image)
	}
	return img, nil
}

// lookup returns the last state of want's lineage when its image still exists.
func (m *Manager) lookup(ctx context.Context, want Environment) (Environment, bool) {
	prev, ok := m.remembered()[want.identity()]
	if !ok {
		return Environment{}, false
	}
	img, found, err := inspectRef(ctx, m.Engine(), prev.Image)
	return prev, err == nil && found && (prev.Image == prev.BaseImage || ownLayer(img, m.cfg.Installer.Tenant))
}

func (m *Manager) set(env Environment) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.active = env
	if m.known == nil {
		m.known = map[string]Environment{}
	}
	m.known[env.identity()] = env
}

// remembered returns the last state of every lineage: this manager's own,
// updated from the state file, which another server sharing the state
// directory may have written since.
func (m *Manager) remembered() map[string]Environment {
	m.mu.Lock()
	known := maps.Clone(m.known)
	m.mu.Unlock()
	if known == nil {
		known = map[string]Environment{}
	}
	if m.cfg.StatePath == "" {
		return known
	}
	if st, ok, err := loadState(m.cfg.StatePath); err == nil && ok {
		maps.Copy(known, st.Known)
	}
	return known
}

// persist saves env as the active environment, with every remembered
// lineage, and adopts what another server saved meanwhile. A state file
// that cannot be written only costs persistence: it is logged.
func (m *Manager) persist(env Environment) {
	if m.cfg.StatePath == "" {
		return
	}
	known := m.remembered()
	known[env.identity()] = env
	m.mu.Lock()
	m.known = known
	m.mu.Unlock()
	if err := saveState(m.cfg.StatePath, state{Origin: m.origin, Environment: env, Known: known}); err != nil {
		m.log.Warn("environment not saved; it will not survive a restart", "err", err)
	}
}

// Configure switches to a new environment after checking that its image
// exists and its Python starts. On any error nothing changes.
func (m *Manager) Configure(ctx context.Context, want Environment) (Environment, error) {
	env, err := want.Normalize()
	if err != nil {
		return Environment{}, err
	}
	if err := m.changes.Acquire(ctx, 1); err != nil {
		return Environment{}, context.Cause(ctx)
	}
	defer m.changes.Release(1)
	if prev, ok := m.lookup(ctx, env); ok {
		env = prev
	}
	if err := m.resolve(ctx, &env); err != nil {
		return Environment{}, err
	}
	if err := m.verify(ctx, &env); err != nil {
		return Environment{}, err
	}
	m.persist(env)
	m.set(env)
	return env, nil
}

// Canonical validates specs under the manager's requirement policy (as
// ParseRequirements) and returns their canonical forms, sorted.
func (m *Manager) Canonical(specs []string) ([]string, error) {
	reqs, err := ParseRequirements(specs, m.cfg.Policy)
	if err != nil {
		return nil, err
	}
	canon := make([]string, len(reqs))
	for i, r := range reqs {
		canon[i] = r.String()
	}
	return canon, nil
}

// Install validates specs, installs them into the active environment and
// switches to the result. Identical concurrent requests share one install.
func (m *Manager) Install(ctx context.Context, specs []string) (InstallResult, error) {
	canon, err := m.Canonical(specs)
	if err != nil {
		return InstallResult{}, err
	}
	key, _ := json.Marshal(append([]string{m.Active().ImageID}, canon...)) // strings always marshal
	ch := m.flight.DoChan(string(key), func() (any, error) {
		return m.owned(func() (InstallResult, error) { return m.install(m.ctx, canon) })
	})
	select {
	case r := <-ch:
		res, _ := r.Val.(InstallResult) // the zero value on error
		return res, r.Err
	case <-ctx.Done():
		return InstallResult{}, context.Cause(ctx)
	}
}

func (m *Manager) install(ctx context.Context, canon []string) (InstallResult, error) {
	if err := m.changes.Acquire(ctx, 1); err != nil {
		return InstallResult{}, err
	}
	defer m.changes.Release(1)
	res, err := m.cfg.Installer.Install(ctx, m.Active(), canon)
	if err != nil {
		return res, err
	}
	m.persist(res.Env)
	m.set(res.Env)
	return res, nil
}

// Engine is the Docker client the manager uses.
func (m *Manager) Engine() *engine.Client { return m.cfg.Installer.Engine }
