package app

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/docker/go-units"

	"github.com/pybox-dev/pybox/images"
	"github.com/pybox-dev/pybox/internal/logcap"
	"github.com/pybox-dev/pybox/internal/quotafs"
	"github.com/pybox-dev/pybox/policies"
	"github.com/pybox-dev/pybox/sandbox"
	"github.com/pybox-dev/pybox/tools"
)

// Config is every setting of one pybox: cmd/pybox fills it from flags,
// environment variables and the policy (flags win). New validates it.
type Config struct {
	StorageDir    string
	Image         string
	Variant       string
	Runtime       string
	Backend       string
	K8sNamespace  string
	Kubeconfig    string
	K8sAccept     string
	Timeout       time.Duration
	MaxTimeout    time.Duration
	Memory        string
	CPUs          float64
	Pids          int64
	OutputLimit   string
	Quota         string
	QuotaFiles    int64
	QuotaMode     string
	DiskReserve   string
	MaxCalls      int
	StallTimeout  time.Duration
	MaxConcurrent int
	QueueWait     time.Duration
	MaxSessions   int
	WarmPool      int
	SessionTTL    time.Duration
	MaxCodeBytes  string
	MaxFileBytes  string
	LogLevel      string
	Toolset       string
	Policy        string
	LoadedPolicy  *policies.Policy // Policy, loaded (cmd/pybox's parseFlags); nil: none
	Mirror        string
	Build         string
	EnvType       string
	VenvPath      string
	UVVenvPath    string
	CondaName     string
	PythonPath    string
	Preinstalled  string
	IndexURL      string
	ExtraIndexURL string
	Wheelhouse    string
	AllowedImages string
	InstallNet    string
	InstallAllow  string
	EgressAllow   string
	EgressAddrs   string
	EgressTest    string
	EgressOut     string // bytes a run sends through its proxy (a size)
	EgressIn      string // bytes it receives
	EgressConns   int    // a run's connections at once
	EgressTotal   int    // a run's connections in all
	TenantEgress  string
	// TenantEgressConns: connections at once through all of one tenant's
	// proxies (--http with tokens).
	TenantEgressConns int
	InstallTime       time.Duration
	LayerQuota        string // disk an owner's package layers may take (images.Installer.LayerBytes)
	StateDir          string
	AllowURLReqs      bool
	AllowSdist        bool
	// InMemory: every program comes with its request and runs on a tmpfs
	// workspace of its own (pybox eval): the app opens no code storage, no
	// run output folders and no quota filesystem.
	InMemory bool

	// serve --http only
	Serving        bool // the command is serve (a single owner's storage filesystem is opened by New)
	HTTPAddr       string
	TokensFile     string
	AllowedOrigins string
	InsecureNoAuth bool
	MetricsAddr    string
	TenantRate     int
	ShutdownGrace  time.Duration
	MCPServers     string
	MCPMaxCalls    int
	MCPCallTimeout time.Duration
	MCPMaxResult   string
	MaxConns       int           // open connections to a listener in total
	MaxClientConns int           // open connections from one client address
	HTTPIdle       time.Duration // a kept-alive connection idle this long is closed
	MaxMCPSessions int           // MCP sessions a tenant keeps open at once

	// EnvTypeChosen: ENV_TYPE (or --env-type) was given, not defaulted
	// (a host's CONDA_ENV_NAME is then taken as meant: adoptHostSettings).
	EnvTypeChosen bool
	// Version is pybox's, told to MCP clients and downstream servers.
	Version string

	hostPackages []string // a host venv's packages to install (adoptHostSettings)
}

// layerBytes is the package layer budget (0: the installer's default).
func (c *Config) layerBytes() (int64, error) {
	if c.LayerQuota == "" {
		return 0, nil
	}
	n, err := units.RAMInBytes(c.LayerQuota)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("layer quota %q: must be a size such as 10g", c.LayerQuota)
	}
	return n, nil
}

// Limits turns the configuration into sandbox limits.
func (c *Config) Limits() (sandbox.Limits, error) {
	mem, err := units.RAMInBytes(c.Memory)
	if err != nil {
		return sandbox.Limits{}, fmt.Errorf("memory %q: %w", c.Memory, err)
	}
	out, err := units.RAMInBytes(c.OutputLimit)
	if err != nil {
		return sandbox.Limits{}, fmt.Errorf("output limit %q: %w", c.OutputLimit, err)
	}
	quota, err := units.RAMInBytes(c.Quota)
	if err != nil {
		return sandbox.Limits{}, fmt.Errorf("workspace quota %q: %w", c.Quota, err)
	}
	reserve, err := units.RAMInBytes(c.DiskReserve)
	if err != nil {
		return sandbox.Limits{}, fmt.Errorf("disk reserve %q: %w", c.DiskReserve, err)
	}
	if reserve == 0 {
		reserve = -1 // none (a zero limit means the default)
	}
	l := sandbox.Limits{Timeout: c.Timeout, Memory: mem, CPUs: c.CPUs, Pids: c.Pids, OutputBytes: int(out),
		WorkspaceBytes: quota, WorkspaceFiles: c.QuotaFiles, DiskReserve: reserve}.WithDefaults()
	return l, l.Validate()
}

// CodeLimit is the largest program in bytes.
func (c *Config) CodeLimit() (int, error) { return sizeSetting("max code size", c.MaxCodeBytes) }

// FileLimit is the largest code file in bytes.
func (c *Config) FileLimit() (int, error) { return sizeSetting("max file size", c.MaxFileBytes) }

func sizeSetting(name, v string) (int, error) {
	n, err := units.RAMInBytes(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s %q: must be a size such as 1m", name, v)
	}
	return int(n), nil
}

// ImageRef is the runtime image tag in force.
func (c *Config) ImageRef() (string, error) {
	variant, err := images.ParseVariant(c.Variant)
	if err != nil {
		return "", err
	}
	if c.Image != "" {
		return c.Image, nil
	}
	return images.Tag(variant), nil
}

// Logger is the server's log on w: values cut at 1 KiB, a message
// repeated past a burst rate-limited.
func (c *Config) Logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return nil, fmt.Errorf("log level %q: use debug, info, warn or error", c.LogLevel)
	}
	// Bounded: values cut at 1 KiB, a message repeated past a burst
	// rate-limited, so nothing a program provokes floods the log.
	return slog.New(logcap.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))), nil
}

// AccessLogger is the HTTP access log's: every line written (values cut
// at logcap.MaxValue, no rate limit).
func (c *Config) AccessLogger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return nil, fmt.Errorf("log level %q: use debug, info, warn or error", c.LogLevel)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})), nil
}

// Validate checks settings that have no parser of their own.
func (c *Config) Validate() error {
	var errs []error
	c.StorageDir, c.StateDir = hostPath(c.StorageDir), hostPath(c.StateDir)
	switch c.Build {
	case "auto", "online", "offline", "never":
	default:
		errs = append(errs, fmt.Errorf("build %q: use auto, online, offline or never", c.Build))
	}
	if c.Backend != "docker" && c.Backend != "kubernetes" {
		errs = append(errs, fmt.Errorf("backend %q: use docker or kubernetes", c.Backend))
	}
	if _, err := acceptUnenforced(c.K8sAccept); err != nil {
		errs = append(errs, err)
	}
	if _, err := quotafs.ParseMode(c.QuotaMode); err != nil {
		errs = append(errs, err)
	}
	if _, err := c.layerBytes(); err != nil {
		errs = append(errs, err)
	}
	if c.MaxTimeout < c.Timeout {
		errs = append(errs, fmt.Errorf("max timeout %v is below the default timeout %v", c.MaxTimeout, c.Timeout))
	}
	if c.StallTimeout < 100*time.Millisecond {
		errs = append(errs, errors.New("stall timeout must be at least 100ms"))
	}
	if c.MaxCalls < 1 {
		errs = append(errs, errors.New("max calls must be at least 1"))
	}
	if c.MaxConcurrent < 1 {
		errs = append(errs, errors.New("max concurrent must be at least 1"))
	}
	if _, err := c.ImageRef(); err != nil {
		errs = append(errs, err)
	}
	if !slices.Contains(tools.Toolsets(), c.Toolset) {
		errs = append(errs, fmt.Errorf("toolset %q: use one of %s", c.Toolset, strings.Join(tools.Toolsets(), ", ")))
	}
	if _, err := c.InitialEnv().Normalize(); err != nil {
		errs = append(errs, err)
	}
	if _, err := c.Index(); err != nil {
		errs = append(errs, err)
	}
	if _, err := tenantEgress(c.TenantEgress); err != nil {
		errs = append(errs, err)
	}
	if err := apart(c.StateDir, c.StorageDir); err != nil {
		errs = append(errs, err)
	}
	if err := c.notNested(os.Getenv(ParentDirsVar)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// apart refuses a state dir and a code storage that contain one another:
// sandboxed programs write in code storage, and the state dir holds what
// no program may touch (session workspaces, run output folders, leases).
func apart(state, code string) error {
	s, c := realish(state), realish(code)
	if within(s, c) || within(c, s) {
		return fmt.Errorf("the state dir %s and the code storage %s must not contain one another: "+
			"programs can write in code storage, and the state dir holds what they must not reach", state, code)
	}
	return nil
}

// within reports whether p is dir or inside it.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && filepath.IsLocal(rel) || rel == "."
}

// realish is path made absolute with symlinks resolved as far as it exists.
func realish(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	for p, rest := abs, ""; ; p, rest = filepath.Dir(p), filepath.Join(filepath.Base(p), rest) {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(real, rest)
		}
		if p == filepath.Dir(p) {
			return abs
		}
	}
}

// InitialEnv is the environment the configuration asks for at start.
func (c *Config) InitialEnv() images.Environment {
	env := images.Environment{Type: c.EnvType, CondaName: c.CondaName, PythonPath: c.PythonPath, BaseImage: c.Image}
	switch c.EnvType {
	case images.EnvVenv:
		env.VenvPath = c.VenvPath
	case images.EnvVenvUV, "":
		env.VenvPath = c.UVVenvPath
	}
	if c.Image == "" && c.EnvType != images.EnvImage {
		env.Variant = c.Variant
	}
	return env
}

// Index is the package index configuration.
func (c *Config) Index() (images.Index, error) {
	idx := images.Index{URL: c.IndexURL, ExtraURL: c.ExtraIndexURL, Wheelhouse: c.Wheelhouse, Network: c.InstallNet, AllowSdist: c.AllowSdist,
		Allow: SplitList(c.InstallAllow)}
	switch c.InstallNet {
	case "index", "allowlist", "none":
	case "bridge", "host": // their old meaning, the index; no container gets either network any more
		idx.Network = "index"
	default:
		return idx, fmt.Errorf("install network %q: use index, allowlist or none", c.InstallNet)
	}
	eg, err := c.egress()
	if err != nil {
		return idx, err
	}
	idx.Egress = *eg
	if idx.Wheelhouse != "" {
		abs, err := filepath.Abs(idx.Wheelhouse)
		if err != nil {
			return idx, fmt.Errorf("wheelhouse: %w", err)
		}
		if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
			return idx, fmt.Errorf("wheelhouse %s is not a directory", abs)
		}
		idx.Wheelhouse = abs
	}
	return idx, nil
}

// allowedImages splits PYBOX_ALLOWED_IMAGES (commas or spaces).
func (c *Config) allowedImages() []string {
	return strings.FieldsFunc(c.AllowedImages, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
}

// preinstalled splits PREINSTALLED_PACKAGES.
func (c *Config) preinstalled() []string {
	return append(strings.Fields(c.Preinstalled), c.hostPackages...)
}

// DefaultStateDir is a per-user state directory (never inside code
// storage, which sandboxed code can write).
func DefaultStateDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "pybox")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "pybox")
	}
	return filepath.Join(os.TempDir(), "pybox-"+strconv.Itoa(os.Getuid()), "state")
}

// DefaultStorageDir is a per-user data directory.
func DefaultStorageDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "pybox", "code")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "share", "pybox", "code")
	}
	return filepath.Join(os.TempDir(), "pybox-"+strconv.Itoa(os.Getuid()), "code")
}

// SplitList splits a comma-separated setting, its items trimmed, empty
// ones dropped.
func SplitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// TenantName is what a tenant's name may be (tokens and tenant egress
// files): it names folders.
var TenantName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
