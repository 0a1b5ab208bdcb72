package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

// commandSettingsTable: flags each command must have and must not have.
var commandSettingsTable = []struct {
	cmd        string
	has, lacks []string
}{
	{"serve", []string{"http", "tokens", "metrics-addr", "mcp-servers", "session-ttl", "max-sessions", "toolset", "stall-timeout", "memory", "warm-pool", "quota-mode"}, nil},
	{"run", []string{"memory", "timeout", "policy", "runtime", "egress-allow", "env-type", "preinstalled-packages", "state-dir", "workspace-quota", "stdin", "json"},
		[]string{"http", "tokens", "metrics-addr", "mcp-servers", "session-ttl", "max-sessions", "toolset", "stall-timeout", "max-calls", "warm-pool", "max-concurrent", "max-file-size", "max-timeout", "code-storage-dir", "quota-mode"}},
	{"eval", []string{"memory", "timeout", "max-timeout", "max-concurrent", "policy", "egress-allow", "state-dir", "workspace-quota", "o", "j", "problems"},
		[]string{"http", "tokens", "mcp-servers", "session-ttl", "max-sessions", "toolset", "stall-timeout", "max-calls", "max-file-size", "code-storage-dir", "quota-mode"}},
	{"bench", []string{"memory", "toolset", "session-ttl", "warm-pool", "runtime", "n", "eval", "kubernetes"},
		[]string{"http", "tokens", "metrics-addr", "tenant-calls-per-minute", "mcp-servers"}},
	{"doctor", []string{"runtime", "image", "variant", "code-storage-dir", "state-dir", "policy", "backend", "kubeconfig", "memory", "log-level"},
		[]string{"http", "tokens", "toolset", "session-ttl", "warm-pool", "egress-allow", "timeout", "env-type", "index-url", "max-calls"}},
	{"gc", []string{"state-dir", "log-level", "all", "dry-run"},
		[]string{"http", "memory", "image", "runtime", "timeout", "toolset", "code-storage-dir", "policy", "warm-pool"}},
}

// TestCommandFlags: each command's flag set (the one its --help prints)
// has the settings it uses and not the others, and its environment
// variables list is the same.
func TestCommandFlags(t *testing.T) {
	for _, tt := range commandSettingsTable {
		t.Run(tt.cmd, func(t *testing.T) {
			h := commandFlags(t, tt.cmd)
			env := envHelp(h.c)
			for _, name := range tt.has {
				if h.fs.Lookup(name) == nil {
					t.Errorf("pybox %s has not --%s", tt.cmd, name)
				}
			}
			for _, name := range tt.lacks {
				if h.fs.Lookup(name) != nil {
					t.Errorf("pybox %s has --%s, which it does not use", tt.cmd, name)
				}
				if s := settingOf(t, name); strings.Contains(env, " "+s.env+" ") {
					t.Errorf("pybox %s --help lists %s, which it does not use", tt.cmd, s.env)
				}
			}
			for _, s := range h.c.settings() {
				if h.fs.Lookup(s.flag) == nil || !strings.Contains(env, " "+s.env+" ") {
					t.Errorf("pybox %s: setting --%s ($%s) is not both a flag and in the environment list", tt.cmd, s.flag, s.env)
				}
			}
		})
	}
	if got := len(commandFlags(t, "serve").c.settings()); got != len(everySetting()) {
		t.Errorf("serve has %d settings of %d; it has them all", got, len(everySetting()))
	}
}

// settingOf is the setting of a flag.
func settingOf(t *testing.T, flag string) setting {
	t.Helper()
	i := slices.IndexFunc(everySetting(), func(s setting) bool { return s.flag == flag })
	if i < 0 {
		t.Fatalf("--%s is no setting", flag)
	}
	return everySetting()[i]
}

// TestCommandRefusesOthersFlags: a flag of a setting the command has not
// is a usage error (exit 2) that names the command and the flag; nothing
// starts (these commands would need Docker otherwise).
func TestCommandRefusesOthersFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"gc", "--memory", "1g"}, "pybox gc: --memory is not a setting of gc, but of serve, run, eval, bench and doctor; pybox gc --help lists gc's"},
		{[]string{"gc", "--dry-run", "--toolset=all"}, "pybox gc: --toolset is not a setting of gc"},
		{[]string{"run", "--http", "127.0.0.1:0", "prog.py"}, "pybox run: --http is not a setting of run, but of serve;"},
		{[]string{"run", "--insecure-no-auth", "prog.py"}, "pybox run: --insecure-no-auth is not a setting of run"},
		{[]string{"eval", "-session-ttl=1m", "samples.jsonl"}, "pybox eval: --session-ttl is not a setting of eval"},
		{[]string{"bench", "--tokens", "tokens"}, "pybox bench: --tokens is not a setting of bench"},
		{[]string{"doctor", "--egress-allow", "pypi.org"}, "pybox doctor: --egress-allow is not a setting of doctor"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stderr bytes.Buffer
			code := run(context.Background(), tt.args, strings.NewReader(""), io.Discard, &stderr)
			if code != 2 || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr.String(), tt.want)
			}
		})
	}
}

// TestCommandIgnoresOthersEnv: the environment variable of a setting the
// command has not is ignored (even an invalid value): the setting keeps
// its default; the command's own variables still apply.
func TestCommandIgnoresOthersEnv(t *testing.T) {
	t.Setenv("PYBOX_MEMORY", "lots")       // invalid, and no setting of gc
	t.Setenv("PYBOX_HTTP", "127.0.0.1:1")  // serve's only
	t.Setenv("PYBOX_SESSION_TTL", "never") // invalid, and no setting of run
	t.Setenv("PYBOX_LOG_LEVEL", "debug")   // everyone's
	t.Setenv("PYBOX_TIMEOUT", "10m")       // above max-timeout's default, which run has not
	t.Setenv("PYBOX_WARM_POOL", "3")       // serve's, eval's and bench's
	tests := []struct {
		cmd    string
		memory string // PYBOX_MEMORY's, or the default where the command has not --memory
	}{{"gc", "512m"}, {"run", "lots"}, {"doctor", "lots"}}
	for _, tt := range tests {
		t.Run(tt.cmd, func(t *testing.T) {
			c := commandConfig(tt.cmd)
			fs := flag.NewFlagSet(tt.cmd, flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			if err := c.parseFlags(fs, nil); err != nil {
				t.Fatal(err)
			}
			if c.LogLevel != "debug" || c.HTTPAddr != "" || c.Memory != tt.memory || c.SessionTTL != 15*time.Minute {
				t.Errorf("log level %q (env debug), http %q, memory %q (want %q), session ttl %v: want the variables of settings it has not ignored",
					c.LogLevel, c.HTTPAddr, c.Memory, tt.memory, c.SessionTTL)
			}
			if c.MaxTimeout < c.Timeout {
				t.Errorf("max timeout %v below timeout %v: a setting it has not contradicts one it has", c.MaxTimeout, c.Timeout)
			}
			if c.WarmPool != 0 { // a pool refilled for doctor's temporary workspace as it went
				t.Errorf("warm pool %d: a command without the setting runs without a pool", c.WarmPool)
			}
		})
	}
}

// TestForwardable: bench hands a child pybox only the flags its command has.
func TestForwardable(t *testing.T) {
	forward := []string{"--memory=1g", "--warm-pool=3", "--toolset=all", "--session-ttl=1m", "--runtime=runsc"}
	for cmd, want := range map[string][]string{
		"run":   {"--memory=1g", "--runtime=runsc"},
		"eval":  {"--memory=1g", "--warm-pool=3", "--runtime=runsc"},
		"serve": forward,
	} {
		if got := forwardable(cmd, forward); !slices.Equal(got, want) {
			t.Errorf("forwardable(%s) = %v, want %v", cmd, got, want)
		}
	}
}
