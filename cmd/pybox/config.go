package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
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

// config is every setting, from flags and environment variables (flags win).
type config struct {
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
	policy        *policies.Policy // loaded by parseFlags
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
	TenantEgress  string
	InstallTime   time.Duration
	StateDir      string
	AllowURLReqs  bool
	AllowSdist    bool
	// inMemory: every program comes with its request and runs on a tmpfs
	// workspace of its own (pybox eval): the app opens no code storage, no
	// run output folders and no quota filesystem.
	inMemory bool

	// serve --http only (see httpSettings)
	serving        bool // the command is serve: its HTTP settings are registered
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

	omit         []string        // the flags of settings a subcommand does not use (eval's: evalOmits)
	given        map[string]bool // flags given on the command line (parseFlags)
	hostPackages []string        // a host venv's packages to install (adoptHostSettings)
}

// setting ties a flag to its environment variable.
type setting struct {
	flag, env, usage string
	bind             func(fs *flag.FlagSet, name, usage string)
}

// settings are the command's settings: all but c.omit's.
func (c *config) settings() []setting {
	return slices.DeleteFunc(c.allSettings(), func(s setting) bool { return !c.uses(s.flag) })
}

func (c *config) allSettings() []setting {
	all := c.commonSettings()
	if c.serving {
		all = append(all, c.httpSettings()...)
	}
	return all
}

// uses tells whether the command has the setting of this flag.
func (c *config) uses(flag string) bool { return !slices.Contains(c.omit, flag) }

// httpSettings are serve's settings for MCP over streamable HTTP.
func (c *config) httpSettings() []setting {
	return []setting{
		{"http", "PYBOX_HTTP", "serve MCP over streamable HTTP on this address (host:port, path /mcp) instead of stdio", func(fs *flag.FlagSet, n, u string) { fs.StringVar(&c.HTTPAddr, n, "", u) }},
		{"tokens", "PYBOX_TOKENS", "bearer tokens file for --http: lines \"TENANT TOKEN\"; each tenant is isolated; reloaded on SIGHUP", func(fs *flag.FlagSet, n, u string) { fs.StringVar(&c.TokensFile, n, "", u) }},
		{"tenant-egress", "PYBOX_TENANT_EGRESS", "per-tenant egress allowlists file for --http: lines \"TENANT HOST,HOST...\" (\"TENANT -\": none); a tenant listed there gets its own list instead of --egress-allow", func(fs *flag.FlagSet, n, u string) { fs.StringVar(&c.TenantEgress, n, "", u) }},
		{"allowed-origins", "PYBOX_ALLOWED_ORIGINS", "comma-separated Origin values browsers may call --http from (a request with another Origin gets 403)", func(fs *flag.FlagSet, n, u string) { fs.StringVar(&c.AllowedOrigins, n, "", u) }},
		{"insecure-no-auth", "PYBOX_INSECURE_NO_AUTH", "let --http listen on a non-loopback address without tokens (anyone who reaches it runs code)", func(fs *flag.FlagSet, n, u string) { fs.BoolVar(&c.InsecureNoAuth, n, false, u) }},
		{"metrics-addr", "PYBOX_METRICS_ADDR", "with --tokens, serve /metrics (Prometheus) on this separate address; without tokens /metrics is on --http's", func(fs *flag.FlagSet, n, u string) { fs.StringVar(&c.MetricsAddr, n, "", u) }},
		{"tenant-calls-per-minute", "PYBOX_TENANT_CALLS_PER_MINUTE", "tool calls a tenant may make per minute over --http (0 = no limit)", func(fs *flag.FlagSet, n, u string) { fs.IntVar(&c.TenantRate, n, 600, u) }},
		{"mcp-servers", "PYBOX_MCP_SERVERS", "downstream MCP servers file (code mode: sandboxed code calls their tools); default mcp_servers.json in the state directory, when there", func(fs *flag.FlagSet, n, u string) { fs.StringVar(&c.MCPServers, n, "", u) }},
		{"mcp-max-calls", "PYBOX_MCP_MAX_CALLS", "downstream tool calls one run may make", func(fs *flag.FlagSet, n, u string) { fs.IntVar(&c.MCPMaxCalls, n, 50, u) }},
		{"mcp-call-timeout", "PYBOX_MCP_CALL_TIMEOUT", "time limit of one downstream tool call", func(fs *flag.FlagSet, n, u string) { fs.DurationVar(&c.MCPCallTimeout, n, 30*time.Second, u) }},
		{"mcp-max-result", "PYBOX_MCP_MAX_RESULT", "largest downstream tool result handed to a program (e.g. 256k)", func(fs *flag.FlagSet, n, u string) { fs.StringVar(&c.MCPMaxResult, n, "256k", u) }},
		{"max-connections", "PYBOX_MAX_CONNECTIONS", "open connections --http (and --metrics-addr) keeps at once; more are refused before authentication", func(fs *flag.FlagSet, n, u string) { fs.IntVar(&c.MaxConns, n, 1024, u) }},
		{"max-connections-per-client", "PYBOX_MAX_CONNECTIONS_PER_CLIENT", "open connections from one client IP address at once (a reverse proxy in front counts as one client)", func(fs *flag.FlagSet, n, u string) { fs.IntVar(&c.MaxClientConns, n, 128, u) }},
		{"http-idle-timeout", "PYBOX_HTTP_IDLE_TIMEOUT", "a kept-alive HTTP connection with no request for this long is closed", func(fs *flag.FlagSet, n, u string) { fs.DurationVar(&c.HTTPIdle, n, time.Minute, u) }},
		{"max-mcp-sessions", "PYBOX_MAX_MCP_SESSIONS", "MCP sessions one tenant keeps open at once over --http; a new one past it is refused (429) until one is closed or idles out", func(fs *flag.FlagSet, n, u string) { fs.IntVar(&c.MaxMCPSessions, n, 64, u) }},
		{"shutdown-grace", "PYBOX_SHUTDOWN_GRACE", "how long --http waits for calls in flight when it stops", func(fs *flag.FlagSet, n, u string) { fs.DurationVar(&c.ShutdownGrace, n, 30*time.Second, u) }},
	}
}

func (c *config) commonSettings() []setting {
	str := func(p *string, def string) func(*flag.FlagSet, string, string) {
		return func(fs *flag.FlagSet, n, u string) { fs.StringVar(p, n, def, u) }
	}
	dur := func(p *time.Duration, def time.Duration) func(*flag.FlagSet, string, string) {
		return func(fs *flag.FlagSet, n, u string) { fs.DurationVar(p, n, def, u) }
	}
	return []setting{
		{"code-storage-dir", "CODE_STORAGE_DIR", "directory for code files, mounted at /workspace", str(&c.StorageDir, defaultStorageDir())},
		{"image", "PYBOX_IMAGE", "runtime image (default pybox-runtime:<variant>)", str(&c.Image, "")},
		{"allowed-images", "PYBOX_ALLOWED_IMAGES", "images configure_environment may start from besides pybox's runtime images and --image: full references (name:tag or name@sha256:digest), separated by commas or spaces; never image IDs", str(&c.AllowedImages, "")},
		{"variant", "PYBOX_VARIANT", "runtime image variant: base or datascience", str(&c.Variant, "base")},
		{"runtime", "PYBOX_RUNTIME", "OCI runtime for sandboxes (runc, crun, runsc); default the daemon's", str(&c.Runtime, "")},
		{"backend", "PYBOX_BACKEND", "where sandboxes run: docker (Docker or Podman) or kubernetes (a pod each; see docs/kubernetes.md)", str(&c.Backend, "docker")},
		{"k8s-namespace", "PYBOX_K8S_NAMESPACE", "namespace of the sandbox pods with --backend kubernetes; default the kubeconfig's (in a pod: its own)", str(&c.K8sNamespace, "")},
		{"k8s-accept-unenforced", "PYBOX_K8S_ACCEPT_UNENFORCED", "with --backend kubernetes, the start checks a cluster may fail and pybox still serves, separated by commas: networkpolicy (the deny-all NetworkPolicy is not enforced: sandboxes reach each other), pids (pods have no processes bound); default none: pybox refuses to start", str(&c.K8sAccept, "")},
		{"kubeconfig", "KUBECONFIG", "kubeconfig file for --backend kubernetes; default the in-cluster config in a pod, else ~/.kube/config", str(&c.Kubeconfig, "")},
		{"timeout", "PYBOX_TIMEOUT", "default wall-clock limit per run", dur(&c.Timeout, sandbox.DefaultTimeout)},
		{"max-timeout", "PYBOX_MAX_TIMEOUT", "largest timeout a call may ask for", dur(&c.MaxTimeout, tools.DefaultMaxTimeout)},
		{"memory", "PYBOX_MEMORY", "memory per run, no extra swap (e.g. 512m, 1g)", str(&c.Memory, "512m")},
		{"cpus", "PYBOX_CPUS", "CPU quota per run in cores", func(fs *flag.FlagSet, n, u string) { fs.Float64Var(&c.CPUs, n, sandbox.DefaultCPUs, u) }},
		{"pids", "PYBOX_PIDS", "processes and threads per run", func(fs *flag.FlagSet, n, u string) { fs.Int64Var(&c.Pids, n, sandbox.DefaultPids, u) }},
		{"output-limit", "PYBOX_OUTPUT_LIMIT", "cap per output stream (e.g. 1m)", str(&c.OutputLimit, "1m")},
		{"workspace-quota", "PYBOX_WORKSPACE_QUOTA", "storage quota of an owner (a tenant): code storage, session folders and the output folders of runs under way together, enforced while programs run (e.g. 1g)", str(&c.Quota, "1g")},
		{"workspace-max-files", "PYBOX_WORKSPACE_MAX_FILES", "files and folders an owner (a tenant) may hold, all its folders together", func(fs *flag.FlagSet, n, u string) { fs.Int64Var(&c.QuotaFiles, n, sandbox.DefaultWorkspaceFiles, u) }},
		{"quota-mode", "PYBOX_QUOTA_MODE", "how the workspace quota is enforced: filesystem (each owner's folders on an ext4 image of its own, sized to the quota and loop-mounted: the kernel refuses writes past it; Linux, root, loop devices, e2fsprogs), meter (the folders are measured while programs run, which stop when over), or auto (filesystem where possible and the folders hold no files from before, else meter)", str(&c.QuotaMode, "auto")},
		{"disk-reserve", "PYBOX_DISK_RESERVE", "free space the host disk under the workspaces keeps: programs are stopped, and files refused, below it (e.g. 512m)", str(&c.DiskReserve, "512m")},
		{"max-calls", "PYBOX_MAX_CALLS", "tool calls in flight at once (running or queued); more are refused at once", func(fs *flag.FlagSet, n, u string) { fs.IntVar(&c.MaxCalls, n, 32, u) }},
		{"stall-timeout", "PYBOX_STALL_TIMEOUT", "how long a write to the client (stdout) may stay blocked before the client is taken as gone: every run stops, its containers are removed and the server exits", dur(&c.StallTimeout, 30*time.Second)},
		{"max-concurrent", "PYBOX_MAX_CONCURRENT", "programs running at once", func(fs *flag.FlagSet, n, u string) { fs.IntVar(&c.MaxConcurrent, n, 4, u) }},
		{"queue-wait", "PYBOX_QUEUE_WAIT", "how long a run waits for a free slot before a busy error", dur(&c.QueueWait, 30*time.Second)},
		{"warm-pool", "PYBOX_WARM_POOL", "ready containers kept per environment for fast runs, at least (more under demand; 0 disables)", func(fs *flag.FlagSet, n, u string) { fs.IntVar(&c.WarmPool, n, 2, u) }},
		{"max-sessions", "PYBOX_MAX_SESSIONS", "live stateful sessions at once", func(fs *flag.FlagSet, n, u string) { fs.IntVar(&c.MaxSessions, n, 8, u) }},
		{"session-ttl", "PYBOX_SESSION_TTL", "idle time after which a session ends", dur(&c.SessionTTL, 15*time.Minute)},
		{"max-code-size", "PYBOX_MAX_CODE_SIZE", "largest program (or stdin text, or appended chunk) accepted (e.g. 1m)", str(&c.MaxCodeBytes, "1m")},
		{"max-file-size", "PYBOX_MAX_FILE_SIZE", "largest code file the file tools build or read (e.g. 8m)", str(&c.MaxFileBytes, "8m")},
		{"policy", "PYBOX_POLICY", "policy: default, strict, permissive, or a policy file, JSON or YAML (its settings apply where no flag or variable is given)", str(&c.Policy, "default")},
		{"toolset", "PYBOX_TOOLSET", "tools to list: default, mcp-code-executor, mcp-executor, python-executor, all", str(&c.Toolset, "default")},
		{"log-level", "PYBOX_LOG_LEVEL", "log level on stderr: debug, info, warn, error", str(&c.LogLevel, "info")},
		{"debian-mirror", "PYBOX_DEBIAN_MIRROR", "Debian mirror for offline image builds", str(&c.Mirror, "http://deb.debian.org/debian")},
		{"build", "PYBOX_BUILD", "build the runtime image when missing: auto (online, then offline), online, offline, never", str(&c.Build, "auto")},
		{"env-type", "ENV_TYPE", "environment type at start: venv-uv, venv, conda, image", str(&c.EnvType, images.EnvVenvUV)},
		{"venv-path", "VENV_PATH", "venv inside the image for ENV_TYPE=venv", str(&c.VenvPath, "")},
		{"uv-venv-path", "UV_VENV_PATH", "venv inside the image for ENV_TYPE=venv-uv", str(&c.UVVenvPath, "")},
		{"conda-env-name", "CONDA_ENV_NAME", "conda environment for ENV_TYPE=conda (needs an --image with conda)", str(&c.CondaName, "")},
		{"python-path", "PYBOX_PYTHON_PATH", "interpreter inside --image for ENV_TYPE=image", str(&c.PythonPath, "")},
		{"preinstalled-packages", "PREINSTALLED_PACKAGES", "space-separated requirements installed at start (cached as an image layer)", str(&c.Preinstalled, "")},
		{"index-url", "PYBOX_INDEX_URL", "package index URL for installs (default PyPI)", str(&c.IndexURL, "")},
		{"extra-index-url", "PYBOX_EXTRA_INDEX_URL", "extra package index URL", str(&c.ExtraIndexURL, "")},
		{"wheelhouse", "PYBOX_WHEELHOUSE", "host directory of wheels mounted read-only into installs (a readable copy when the install user cannot read it); alone, no index is used", str(&c.Wheelhouse, "")},
		{"install-network", "PYBOX_INSTALL_NETWORK", "what the download step that fetches packages reaches, through pybox's egress proxy (no container has a network interface): index (the index hosts and --install-allow), allowlist (--install-allow only), none (a wheelhouse only)", str(&c.InstallNet, "index")},
		{"install-allow", "PYBOX_INSTALL_ALLOW", "comma-separated hosts (host, host:port, *.suffix) the download step may reach besides the index hosts", str(&c.InstallAllow, "")},
		{"egress-allow", "PYBOX_EGRESS_ALLOW", "comma-separated hosts (host, host:port, *.suffix) programs may reach through pybox's egress proxy; empty: no network at all", str(&c.EgressAllow, "")},
		{"egress-allow-addrs", "PYBOX_EGRESS_ALLOW_ADDRS", "comma-separated private, loopback or link-local addresses or prefixes (10.0.0.5, 10.1.0.0/16) the egress proxy may connect to; by default it refuses them all", str(&c.EgressAddrs, "")},
		{"egress-test-hosts", "PYBOX_EGRESS_TEST_HOSTS", "TEST ONLY: name=address,... the egress proxy resolves instead of asking DNS", str(&c.EgressTest, "")},
		{"install-timeout", "PYBOX_INSTALL_TIMEOUT", "time limit of one install", dur(&c.InstallTime, 10*time.Minute)},
		{"state-dir", "PYBOX_STATE_DIR", "where the active environment is saved across restarts, and the leases (owners/) that tell which leftover containers are safe to remove", str(&c.StateDir, defaultStateDir())},
		{"allow-url-requirements", "PYBOX_ALLOW_URL_REQUIREMENTS", "let install_dependencies accept \"name @ https://...\" requirements", func(fs *flag.FlagSet, n, u string) { fs.BoolVar(&c.AllowURLReqs, n, false, u) }},
		{"allow-sdist", "PYBOX_ALLOW_SDIST", "let installs build source distributions when no wheel fits (their build code runs, unprivileged, in the install container); default wheels only", func(fs *flag.FlagSet, n, u string) { fs.BoolVar(&c.AllowSdist, n, false, u) }},
	}
}

// register adds the settings' flags to fs; a setting the command does
// not use gets its default.
func (c *config) register(fs *flag.FlagSet) {
	unused := flag.NewFlagSet("unused", flag.ContinueOnError)
	for _, s := range c.allSettings() {
		if c.uses(s.flag) {
			s.bind(fs, s.flag, s.usage+" [$"+s.env+"]")
		} else {
			s.bind(unused, s.flag, s.usage)
		}
	}
}

// applyEnv sets, from the environment, every flag not given on the command line.
func (c *config) applyEnv(fs *flag.FlagSet, getenv func(string) string) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, s := range c.settings() {
		v := getenv(s.env)
		if given[s.flag] || v == "" {
			continue
		}
		if err := fs.Set(s.flag, v); err != nil {
			return fmt.Errorf("invalid %s=%q: %w", s.env, v, err)
		}
	}
	return nil
}

// parseFlags parses args into c, then fills unset flags from the
// environment, then from the policy in force.
func (c *config) parseFlags(fs *flag.FlagSet, args []string) error {
	c.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	c.given = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { c.given[f.Name] = true })
	if err := c.applyEnv(fs, os.Getenv); err != nil {
		return err
	}
	warnUnknownEnv(fs.Output(), os.Environ())
	if err := c.applyPolicy(fs); err != nil {
		return err
	}
	if c.InstallNet == "bridge" || c.InstallNet == "host" {
		fmt.Fprintf(fs.Output(), "pybox: warning: install network %q is taken as \"index\": no container gets a network any more; "+
			"installs reach the index hosts only, through pybox's egress proxy (set index, allowlist or none)\n", c.InstallNet)
	}
	return nil
}

// applyPolicy loads the policy and sets every flag that neither the
// command line nor the environment set and the policy has a value for.
func (c *config) applyPolicy(fs *flag.FlagSet) error {
	var known []string
	byEnv := map[string]string{}
	// A policy file may hold any setting; a subcommand takes those it has.
	for _, s := range c.allSettings() {
		if s.env == "PYBOX_POLICY" {
			continue
		}
		known = append(known, s.env)
		if fs.Lookup(s.flag) != nil {
			byEnv[s.env] = s.flag
		}
	}
	p, err := policies.Load(c.Policy, known)
	if err != nil {
		return err
	}
	c.policy = p
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for env, v := range p.Settings {
		if name, ok := byEnv[env]; ok && !given[name] {
			if err := fs.Set(name, v); err != nil {
				return fmt.Errorf("policy %s: invalid %s=%q: %w", p.Name, env, v, err)
			}
		}
	}
	return nil
}

// forwardFlags renders the settings given on the command line as flags for
// a child pybox (the environment is inherited anyway).
func (c *config) forwardFlags(fs *flag.FlagSet) []string {
	known := map[string]bool{}
	for _, s := range c.settings() {
		known[s.flag] = true
	}
	var out []string
	fs.Visit(func(f *flag.Flag) {
		if known[f.Name] {
			out = append(out, "--"+f.Name+"="+f.Value.String())
		}
	})
	return out
}

// limits turns the configuration into sandbox limits.
func (c *config) limits() (sandbox.Limits, error) {
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

// codeLimit is the largest program in bytes.
func (c *config) codeLimit() (int, error) { return sizeSetting("max code size", c.MaxCodeBytes) }

// fileLimit is the largest code file in bytes.
func (c *config) fileLimit() (int, error) { return sizeSetting("max file size", c.MaxFileBytes) }

func sizeSetting(name, v string) (int, error) {
	n, err := units.RAMInBytes(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s %q: must be a size such as 1m", name, v)
	}
	return int(n), nil
}

// image is the runtime image tag in force.
func (c *config) image() (string, error) {
	variant, err := images.ParseVariant(c.Variant)
	if err != nil {
		return "", err
	}
	if c.Image != "" {
		return c.Image, nil
	}
	return images.Tag(variant), nil
}

func (c *config) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return nil, fmt.Errorf("log level %q: use debug, info, warn or error", c.LogLevel)
	}
	// Bounded: values cut at 1 KiB, a message repeated past a burst
	// rate-limited, so nothing a program provokes floods the log.
	return slog.New(logcap.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))), nil
}

// accessLogger is the HTTP access log's: every line written (values cut
// at logcap.MaxValue, no rate limit).
func (c *config) accessLogger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return nil, fmt.Errorf("log level %q: use debug, info, warn or error", c.LogLevel)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})), nil
}

// validate checks settings that have no parser of their own.
func (c *config) validate() error {
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
	if _, err := c.image(); err != nil {
		errs = append(errs, err)
	}
	if !slices.Contains(tools.Toolsets(), c.Toolset) {
		errs = append(errs, fmt.Errorf("toolset %q: use one of %s", c.Toolset, strings.Join(tools.Toolsets(), ", ")))
	}
	if _, err := c.initialEnv().Normalize(); err != nil {
		errs = append(errs, err)
	}
	if _, err := c.index(); err != nil {
		errs = append(errs, err)
	}
	if _, err := tenantEgress(c.TenantEgress); err != nil {
		errs = append(errs, err)
	}
	if err := apart(c.StateDir, c.StorageDir); err != nil {
		errs = append(errs, err)
	}
	if err := c.notNested(os.Getenv(parentDirsVar)); err != nil {
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

// initialEnv is the environment the configuration asks for at start.
func (c *config) initialEnv() images.Environment {
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

// index is the package index configuration.
func (c *config) index() (images.Index, error) {
	idx := images.Index{URL: c.IndexURL, ExtraURL: c.ExtraIndexURL, Wheelhouse: c.Wheelhouse, Network: c.InstallNet, AllowSdist: c.AllowSdist,
		Allow: splitList(c.InstallAllow)}
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
func (c *config) allowedImages() []string {
	return strings.FieldsFunc(c.AllowedImages, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
}

// preinstalled splits PREINSTALLED_PACKAGES.
func (c *config) preinstalled() []string {
	return append(strings.Fields(c.Preinstalled), c.hostPackages...)
}

// defaultStateDir is a per-user state directory (never inside code
// storage, which sandboxed code can write).
func defaultStateDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "pybox")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "pybox")
	}
	return filepath.Join(os.TempDir(), "pybox-"+strconv.Itoa(os.Getuid()), "state")
}

// defaultStorageDir is a per-user data directory.
func defaultStorageDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "pybox", "code")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "share", "pybox", "code")
	}
	return filepath.Join(os.TempDir(), "pybox-"+strconv.Itoa(os.Getuid()), "code")
}

// envHelp lists the environment variables for --help.
func envHelp(c *config) string {
	var b strings.Builder
	for _, s := range c.settings() {
		fmt.Fprintf(&b, "  %-22s --%s\n", s.env, s.flag)
	}
	return b.String()
}
