package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/pybox-dev/pybox/images"
	"github.com/pybox-dev/pybox/internal/app"
	"github.com/pybox-dev/pybox/policies"
	"github.com/pybox-dev/pybox/sandbox"
	"github.com/pybox-dev/pybox/tools"
)

// config is every setting, from flags and environment variables (flags
// win), then the policy: the app's settings and what parsing them needs.
type config struct {
	app.Config
	omit  []string        // the flags of settings a subcommand does not use (eval's: evalOmits)
	given map[string]bool // flags given on the command line (parseFlags)
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
	if c.Serving {
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
		{"tenant-egress-connections", "PYBOX_TENANT_EGRESS_CONNECTIONS", "connections at once through the egress proxies of all of one tenant's runs and installs together (with --tokens); past it a connection is answered 503 and closed unread", func(fs *flag.FlagSet, n, u string) { fs.IntVar(&c.TenantEgressConns, n, 256, u) }},
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
		{"code-storage-dir", "CODE_STORAGE_DIR", "directory for code files, mounted at /workspace", str(&c.StorageDir, app.DefaultStorageDir())},
		{"image", "PYBOX_IMAGE", "runtime image: a local image programs run in instead of pybox's (default pybox-runtime:<variant>)", str(&c.Image, "")},
		{"allowed-images", "PYBOX_ALLOWED_IMAGES", "images configure_environment may start from besides pybox's runtime images and --image: full references (name:tag or name@sha256:digest), separated by commas or spaces; never image IDs", str(&c.AllowedImages, "")},
		{"variant", "PYBOX_VARIANT", "runtime image variant: base or datascience", str(&c.Variant, "base")},
		{"runtime", "PYBOX_RUNTIME", "OCI runtime for sandboxes (runc, crun, runsc: gVisor); on Kubernetes, a RuntimeClass name; default the daemon's", str(&c.Runtime, "")},
		{"backend", "PYBOX_BACKEND", "where sandboxes run: docker (Docker or Podman) or kubernetes (a pod each; see docs/kubernetes.md)", str(&c.Backend, "docker")},
		{"k8s-namespace", "PYBOX_K8S_NAMESPACE", "namespace of the sandbox pods with --backend kubernetes; default the kubeconfig's (in a pod: its own)", str(&c.K8sNamespace, "")},
		{"k8s-accept-unenforced", "PYBOX_K8S_ACCEPT_UNENFORCED", "with --backend kubernetes, the start checks a cluster may fail and pybox still serves, separated by commas: networkpolicy (the deny-all NetworkPolicy is not enforced: sandboxes reach each other), pids (pods have no processes bound); default none: pybox refuses to start", str(&c.K8sAccept, "")},
		{"kubeconfig", "KUBECONFIG", "kubeconfig file for --backend kubernetes; default the in-cluster config in a pod, else ~/.kube/config", str(&c.Kubeconfig, "")},
		{"timeout", "PYBOX_TIMEOUT", "default wall-clock limit per run", dur(&c.Timeout, sandbox.DefaultTimeout)},
		{"max-timeout", "PYBOX_MAX_TIMEOUT", "largest timeout a call may ask for", dur(&c.MaxTimeout, tools.DefaultMaxTimeout)},
		{"memory", "PYBOX_MEMORY", "memory per run, no extra swap (e.g. 512m, 1g)", str(&c.Memory, "512m")},
		{"cpus", "PYBOX_CPUS", "CPU quota per run in cores", func(fs *flag.FlagSet, n, u string) { fs.Float64Var(&c.CPUs, n, sandbox.DefaultCPUs, u) }},
		{"pids", "PYBOX_PIDS", "processes and threads per run", func(fs *flag.FlagSet, n, u string) { fs.Int64Var(&c.Pids, n, sandbox.DefaultPids, u) }},
		{"output-limit", "PYBOX_OUTPUT_LIMIT", "cap per output stream, per run or session call (e.g. 1m); the rest is dropped inside the sandbox (read and counted by the runner, never sent to the server) and truncated set, with the count of bytes dropped", str(&c.OutputLimit, "1m")},
		{"workspace-quota", "PYBOX_WORKSPACE_QUOTA", "storage quota of an owner (a tenant): code storage, session folders and the output folders of runs under way together, enforced while programs run (e.g. 1g; see docs/quota.md)", str(&c.Quota, "1g")},
		{"workspace-max-files", "PYBOX_WORKSPACE_MAX_FILES", "files and folders an owner (a tenant) may hold, all its folders together", func(fs *flag.FlagSet, n, u string) { fs.Int64Var(&c.QuotaFiles, n, sandbox.DefaultWorkspaceFiles, u) }},
		{"quota-mode", "PYBOX_QUOTA_MODE", "how the workspace quota is enforced: filesystem (each owner's folders on an ext4 image of its own, sized to the quota and loop-mounted: the kernel refuses writes past it; Linux, root, loop devices, e2fsprogs), meter (the folders are measured while programs run, which stop when over), or auto (filesystem where possible and the folders hold no files from before, else meter; see docs/quota.md)", str(&c.QuotaMode, "auto")},
		{"disk-reserve", "PYBOX_DISK_RESERVE", "free space the host disk under the workspaces keeps: programs are stopped, and files refused, below it (e.g. 512m; 0: none)", str(&c.DiskReserve, "512m")},
		{"max-calls", "PYBOX_MAX_CALLS", "tool calls in flight at once (running or waiting for a slot), and at most 16 MiB of their arguments: more are refused at once with a busy tool error, before anything is saved", func(fs *flag.FlagSet, n, u string) { fs.IntVar(&c.MaxCalls, n, 32, u) }},
		{"stall-timeout", "PYBOX_STALL_TIMEOUT", "how long a write to the client (stdout) may stay blocked before the client is taken as gone: every run stops, its containers are removed and the server exits with an error (a client that stops reading cannot hold containers)", dur(&c.StallTimeout, 30*time.Second)},
		{"max-concurrent", "PYBOX_MAX_CONCURRENT", "programs running at once", func(fs *flag.FlagSet, n, u string) { fs.IntVar(&c.MaxConcurrent, n, 4, u) }},
		{"queue-wait", "PYBOX_QUEUE_WAIT", "how long a run waits for a free slot before a busy error", dur(&c.QueueWait, 30*time.Second)},
		{"warm-pool", "PYBOX_WARM_POOL", "ready containers kept per environment so a run skips container start-up: at least this many; more while runs come often, up to twice --max-concurrent and at most 8, back to this after 30 s idle; refilled after each run (a second after the first, so a client that calls once and goes leaves none unused); 0 disables", func(fs *flag.FlagSet, n, u string) { fs.IntVar(&c.WarmPool, n, 2, u) }},
		{"max-sessions", "PYBOX_MAX_SESSIONS", "live stateful sessions at once", func(fs *flag.FlagSet, n, u string) { fs.IntVar(&c.MaxSessions, n, 8, u) }},
		{"session-ttl", "PYBOX_SESSION_TTL", "idle time after which a session ends", dur(&c.SessionTTL, 15*time.Minute)},
		{"max-code-size", "PYBOX_MAX_CODE_SIZE", "largest program (or stdin text, or appended chunk) accepted (e.g. 1m)", str(&c.MaxCodeBytes, "1m")},
		{"max-file-size", "PYBOX_MAX_FILE_SIZE", "largest code file the file tools build or read (e.g. 8m)", str(&c.MaxFileBytes, "8m")},
		{"policy", "PYBOX_POLICY", "policy: default, strict, permissive, or a policy file, JSON or YAML (its settings apply where no flag or variable is given)", str(&c.Policy, "default")},
		{"toolset", "PYBOX_TOOLSET", "tools to list: default, mcp-code-executor, mcp-executor, python-executor, all", str(&c.Toolset, "default")},
		{"log-level", "PYBOX_LOG_LEVEL", "log level: debug, info, warn, error; logs go to stderr only (stdout is the protocol), bounded: values are cut at 1 KiB, and a message repeated more than 20 times at once is written once per 3 s after that, with a count of what was left out", str(&c.LogLevel, "info")},
		{"debian-mirror", "PYBOX_DEBIAN_MIRROR", "Debian mirror for offline image builds", str(&c.Mirror, "http://deb.debian.org/debian")},
		{"build", "PYBOX_BUILD", "build the runtime image when missing: auto (online, then offline), online, offline, never", str(&c.Build, "auto")},
		{"env-type", "ENV_TYPE", "environment type at start: venv-uv, venv, conda, image", str(&c.EnvType, images.EnvVenvUV)},
		{"venv-path", "VENV_PATH", "venv inside the image for ENV_TYPE=venv (default /opt/venv)", str(&c.VenvPath, "")},
		{"uv-venv-path", "UV_VENV_PATH", "venv inside the image for ENV_TYPE=venv-uv (default /opt/venv)", str(&c.UVVenvPath, "")},
		{"conda-env-name", "CONDA_ENV_NAME", "conda environment for ENV_TYPE=conda (needs an --image with conda)", str(&c.CondaName, "")},
		{"python-path", "PYBOX_PYTHON_PATH", "interpreter inside --image for ENV_TYPE=image (default python3)", str(&c.PythonPath, "")},
		{"preinstalled-packages", "PREINSTALLED_PACKAGES", "space-separated requirements installed at start (cached as an image layer: later starts hit the cache)", str(&c.Preinstalled, "")},
		{"index-url", "PYBOX_INDEX_URL", "package index URL for installs (default PyPI)", str(&c.IndexURL, "")},
		{"extra-index-url", "PYBOX_EXTRA_INDEX_URL", "extra package index URL", str(&c.ExtraIndexURL, "")},
		{"wheelhouse", "PYBOX_WHEELHOUSE", "host directory of wheels mounted read-only into installs (a readable copy when the install user cannot read it); alone, no index is used (air-gapped hosts)", str(&c.Wheelhouse, "")},
		{"install-network", "PYBOX_INSTALL_NETWORK", "what the download step that fetches packages reaches, through pybox's egress proxy (no container has a network interface): index (the index hosts and --install-allow), allowlist (--install-allow only), none (a wheelhouse only); the old bridge and host are taken as index, with a warning at start", str(&c.InstallNet, "index")},
		{"install-allow", "PYBOX_INSTALL_ALLOW", "comma-separated hosts (host, host:port, *.suffix) the download step may reach besides the index hosts (say, where a private index serves its files)", str(&c.InstallAllow, "")},
		{"egress-allow", "PYBOX_EGRESS_ALLOW", "comma-separated hosts (host: ports 80 and 443; host:port; *.suffix) programs may reach through pybox's egress proxy; empty: no network at all", str(&c.EgressAllow, "")},
		{"egress-allow-addrs", "PYBOX_EGRESS_ALLOW_ADDRS", "comma-separated private, loopback or link-local addresses or prefixes (10.0.0.5, 10.1.0.0/16) the egress proxy may connect to (runs and installs); by default it refuses them all", str(&c.EgressAddrs, "")},
		{"egress-max-out", "PYBOX_EGRESS_MAX_OUT", "bytes one run (or install) may send through its egress proxy, all connections together (e.g. 1g); a transfer past it is cut", str(&c.EgressOut, "1g")},
		{"egress-max-in", "PYBOX_EGRESS_MAX_IN", "bytes one run (or install) may receive through its egress proxy (e.g. 4g)", str(&c.EgressIn, "4g")},
		{"egress-connections", "PYBOX_EGRESS_CONNECTIONS", "connections one run may have open through its egress proxy at once; more are answered 503 and closed unread (on Kubernetes the runner carries at most 64 at once)", func(fs *flag.FlagSet, n, u string) { fs.IntVar(&c.EgressConns, n, 64, u) }},
		{"egress-total-connections", "PYBOX_EGRESS_TOTAL_CONNECTIONS", "connections one run may open through its egress proxy in all", func(fs *flag.FlagSet, n, u string) { fs.IntVar(&c.EgressTotal, n, 4096, u) }},
		{"egress-test-hosts", "PYBOX_EGRESS_TEST_HOSTS", "TEST ONLY: name=address,... the egress proxy resolves instead of asking DNS", str(&c.EgressTest, "")},
		{"install-timeout", "PYBOX_INSTALL_TIMEOUT", "time limit of one install", dur(&c.InstallTime, 10*time.Minute)},
		{"layer-quota", "PYBOX_LAYER_QUOTA", "disk the package layers an owner's installs commit may take together (each tenant's own; each layer's own size): an install past it is refused (e.g. 10g; see docs/quota.md)", str(&c.LayerQuota, "10g")},
		{"state-dir", "PYBOX_STATE_DIR", "where the active environment is saved across restarts, and the leases (owners/) that tell which leftover containers are safe to remove", str(&c.StateDir, app.DefaultStateDir())},
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
	if err := c.refuseOthers(fs, args); err != nil {
		return err
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	c.given = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { c.given[f.Name] = true })
	if err := c.applyEnv(fs, os.Getenv); err != nil {
		return err
	}
	c.EnvTypeChosen = c.given["env-type"] || os.Getenv("ENV_TYPE") != ""
	c.Version = version
	warnUnknownEnv(fs.Output(), os.Environ())
	if err := c.applyPolicy(fs); err != nil {
		return err
	}
	c.keepConsistent()
	if !c.uses("warm-pool") {
		// A command without the setting runs a program or two and exits
		// (run, doctor, gc): a pool would only start containers to remove
		// them, and refill for a temporary workspace while it is removed
		// (doctor's self-tests left an empty outputs/ of theirs behind).
		c.WarmPool = 0
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
	c.LoadedPolicy = p
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

// envHelp lists the environment variables for --help.
func envHelp(c *config) string {
	var b strings.Builder
	for _, s := range c.settings() {
		fmt.Fprintf(&b, "  %-22s --%s\n", s.env, s.flag)
	}
	return b.String()
}
