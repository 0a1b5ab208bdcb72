package main

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/internal/app"
)

func parseConfig(t *testing.T, args []string, env map[string]string) (*config, error) {
	t.Helper()
	c := &config{}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.register(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return c, c.applyEnv(fs, func(k string) string { return env[k] })
}

func TestConfigFlagsWinOverEnv(t *testing.T) {
	c, err := parseConfig(t, []string{"--timeout", "5s"}, map[string]string{
		"PYBOX_TIMEOUT": "9s", "PYBOX_MEMORY": "1g", "CODE_STORAGE_DIR": "/srv/code", "PYBOX_CPUS": "0.5"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Timeout != 5*time.Second || c.Memory != "1g" || c.StorageDir != "/srv/code" || c.CPUs != 0.5 {
		t.Errorf("got timeout %v memory %q storage %q cpus %v; want 5s (flag), 1g, /srv/code, 0.5 (env)",
			c.Timeout, c.Memory, c.StorageDir, c.CPUs)
	}
	l, err := c.Limits()
	if err != nil {
		t.Fatal(err)
	}
	if l.Memory != 1<<30 || l.Timeout != 5*time.Second || l.OutputBytes != 1<<20 {
		t.Errorf("limits %+v", l)
	}
}

func TestConfigDefaults(t *testing.T) {
	c, err := parseConfig(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	l, err := c.Limits()
	if err != nil {
		t.Fatal(err)
	}
	if l.Timeout != 30*time.Second || l.Memory != 512<<20 || l.CPUs != 1 || l.Pids != 128 || l.OutputBytes != 1<<20 {
		t.Errorf("default limits %+v; want 30s, 512 MiB, 1 CPU, 128 pids, 1 MiB", l)
	}
	if img, _ := c.ImageRef(); img != "pybox-runtime:base" {
		t.Errorf("default image %q", img)
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"bad env duration", nil, map[string]string{"PYBOX_TIMEOUT": "soon"}, "PYBOX_TIMEOUT"},
		{"bad memory", []string{"--memory", "lots"}, nil, "memory"},
		{"bad variant", []string{"--variant", "huge"}, nil, "variant"},
		{"bad build mode", []string{"--build", "sometimes"}, nil, "build"},
		{"max below default", []string{"--timeout", "60s", "--max-timeout", "10s"}, nil, "max timeout"},
		{"tiny memory", []string{"--memory", "1m"}, nil, "memory"},
		{"bad log level", []string{"--log-level", "loud"}, nil, "log level"},
		{"bad allow-sdist", nil, map[string]string{"PYBOX_ALLOW_SDIST": "sometimes"}, "PYBOX_ALLOW_SDIST"},
		{"unknown start check", nil, map[string]string{"PYBOX_K8S_ACCEPT_UNENFORCED": "networkpolicy,everything"}, "PYBOX_K8S_ACCEPT_UNENFORCED \"everything\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseConfig(t, tt.args, tt.env)
			if err == nil {
				err = c.Validate()
			}
			if err == nil {
				_, err = c.Limits()
			}
			if err == nil {
				_, err = c.Logger(io.Discard)
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

// parseWithPolicy parses flags, then env, then the policy, as parseFlags.
func parseWithPolicy(t *testing.T, args []string, env map[string]string) *config {
	t.Helper()
	c := &config{}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := c.applyEnv(fs, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if err := c.applyPolicy(fs); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestPolicyPrecedence(t *testing.T) {
	parse := func(args []string, env map[string]string) *config { return parseWithPolicy(t, args, env) }
	c := parse([]string{"--policy", "strict", "--timeout", "3s"}, map[string]string{"PYBOX_MEMORY": "300m"})
	if c.Timeout != 3*time.Second || c.Memory != "300m" || c.Pids != 64 || c.CPUs != 0.5 {
		t.Errorf("strict with overrides: timeout %v (flag 3s) memory %q (env 300m) pids %d cpus %v (policy 64, 0.5)",
			c.Timeout, c.Memory, c.Pids, c.CPUs)
	}
	if err := c.LoadedPolicy.Check("import ctypes"); err == nil {
		t.Error("strict policy let ctypes through")
	}
	if d := parse(nil, nil); d.Pids != 128 || d.LoadedPolicy.Check("import ctypes") != nil {
		t.Errorf("default policy: pids %d; it must change nothing", d.Pids)
	}
	if p := parse(nil, map[string]string{"PYBOX_POLICY": "permissive"}); p.Memory != "2g" || !p.AllowURLReqs {
		t.Errorf("permissive from the environment: memory %q allow URLs %v", p.Memory, p.AllowURLReqs)
	}
}

// TestAllowSdistSetting: wheels only unless the setting or the permissive
// policy allows source distributions; the setting wins over the policy,
// and it reaches the installer's index settings.
func TestAllowSdistSetting(t *testing.T) {
	tests := []struct {
		args []string
		env  map[string]string
		want bool
	}{
		{nil, nil, false},
		{nil, map[string]string{"PYBOX_POLICY": "strict"}, false},
		{nil, map[string]string{"PYBOX_POLICY": "permissive"}, true},
		{nil, map[string]string{"PYBOX_ALLOW_SDIST": "true"}, true},
		{[]string{"--allow-sdist"}, map[string]string{"PYBOX_POLICY": "strict"}, true},
		{nil, map[string]string{"PYBOX_POLICY": "permissive", "PYBOX_ALLOW_SDIST": "false"}, false},
	}
	for _, tt := range tests {
		c := parseWithPolicy(t, tt.args, tt.env)
		idx, err := c.Index()
		if err != nil {
			t.Fatal(err)
		}
		if c.AllowSdist != tt.want || idx.AllowSdist != tt.want {
			t.Errorf("%v %v: allow sdist %v, index %v; want %v", tt.args, tt.env, c.AllowSdist, idx.AllowSdist, tt.want)
		}
	}
}

// TestEvalFlags: `pybox eval` takes only the settings it uses, and the
// ones it does not keep their defaults (the server's still has them all).
func TestEvalFlags(t *testing.T) {
	c := &config{omit: evalOmits}
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	if err := c.parseFlags(fs, []string{"--memory=1g"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"session-ttl", "stall-timeout", "max-sessions", "max-calls", "max-file-size", "toolset", "http"} {
		if fs.Lookup(name) != nil {
			t.Errorf("eval has the server's --%s", name)
		}
	}
	if fs.Lookup("memory") == nil || c.Memory != "1g" || c.MaxCalls != 32 || c.StallTimeout != 30*time.Second || c.Toolset != "default" {
		t.Errorf("eval's settings: memory %q, unused defaults max-calls %d stall %s toolset %q", c.Memory, c.MaxCalls, c.StallTimeout, c.Toolset)
	}
	all := flag.NewFlagSet("all", flag.ContinueOnError)
	(&config{}).register(all)
	for _, name := range evalOmits {
		if all.Lookup(name) == nil {
			t.Errorf("evalOmits names --%s, which is no setting", name)
		}
	}
	for _, name := range []string{"egress-allow", "workspace-quota"} {
		if fs.Lookup(name) == nil {
			t.Errorf("eval has not --%s", name)
		}
	}
	for _, name := range []string{"quota-mode", "code-storage-dir"} { // its programs run in tmpfs workspaces (1d5cf42)
		if fs.Lookup(name) != nil {
			t.Errorf("eval has --%s, which it does not use", name)
		}
	}
	serve := flag.NewFlagSet("serve", flag.ContinueOnError)
	(&config{Config: app.Config{Serving: true}}).register(serve)
	if serve.Lookup("session-ttl") == nil || serve.Lookup("http") == nil {
		t.Error("serve lost its settings")
	}
}
