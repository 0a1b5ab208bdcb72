package sandbox

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestContainerConfigGolden pins the hardened container configuration.
func TestContainerConfigGolden(t *testing.T) {
	tests := []struct {
		name string
		plan Plan
	}{
		{"defaults", Plan{
			Image: "pybox-runtime:base", Cmd: []string{"/opt/venv/bin/python", "-I", "-S", "-c", "RUNNER", "once"},
			User: "10001:10001", Env: map[string]string{"HOME": "/tmp", "LANG": "C.UTF-8"}, Workspace: "/srv/code",
			Outputs: &Outputs{Name: "20261123-120000-0a1b2c3d", Dir: "/var/lib/pybox/runs/o1/20261123-120000-0a1b2c3d"},
			Labels:  map[string]string{LabelManaged: "true", LabelRole: "run"}, Limits: Limits{}.WithDefaults(),
		}},
		{"custom limits with stdin and runtime", Plan{
			Image: "img", Cmd: []string{"python"}, User: "1000:1000", Runtime: "runsc", Stdin: true,
			Limits: Limits{Timeout: time.Second, Memory: 128 << 20, CPUs: 0.5, Pids: 32, OutputBytes: 4096,
				TmpBytes: 8 << 20, FileBytes: 16 << 20, OpenFiles: 256},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, host := ContainerConfig(tt.plan)
			got, err := json.MarshalIndent(map[string]any{"config": cfg, "host_config": host}, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", filepath.Base(t.Name())+".golden.json")
			if *update {
				if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./sandbox -update to create it)", err)
			}
			if string(want) != string(got)+"\n" {
				t.Errorf("container config differs from %s (go test ./sandbox -update after reviewing):\n%s", path, got)
			}
		})
	}
}

// TestHardeningInvariants states the security profile directly, so a golden
// update cannot quietly weaken it.
func TestHardeningInvariants(t *testing.T) {
	cfg, host := ContainerConfig(Plan{Image: "i", User: "10001:10001", Workspace: "/w", Limits: Limits{}.WithDefaults()})
	_, withOut := ContainerConfig(Plan{Image: "i", User: "10001:10001", Workspace: "/w", Limits: Limits{}.WithDefaults(),
		Outputs: &Outputs{Name: "r1", Dir: "/runs/r1"}})
	_, gvisor := ContainerConfig(Plan{Image: "i", User: "10001:10001", Runtime: "runsc", Limits: Limits{}.WithDefaults()})
	checks := []struct {
		name string
		ok   bool
	}{
		{"network none", host.NetworkMode == "none" && cfg.NetworkDisabled},
		{"caps dropped", len(host.CapDrop) == 1 && host.CapDrop[0] == "ALL" && len(host.CapAdd) == 0},
		{"no new privileges", len(host.SecurityOpt) == 1 && host.SecurityOpt[0] == "no-new-privileges"},
		{"read-only root", host.ReadonlyRootfs},
		{"no extra swap", host.Memory > 0 && host.MemorySwap == host.Memory},
		{"pids limit", host.PidsLimit != nil && *host.PidsLimit == DefaultPids},
		{"runsc's pids limit leaves room for gVisor's own tasks", gvisor.PidsLimit != nil && *gvisor.PidsLimit == 2*DefaultPids+64 && gvisor.Runtime == "runsc"},
		{"no docker-init: the runner is PID 1, alone with the streams", host.Init != nil && !*host.Init},
		{"not privileged", !host.Privileged},
		{"no logging", host.LogConfig.Type == "none"},
		{"one mount, the workspace", len(host.Mounts) == 1 && host.Mounts[0].Source == "/w" && host.Mounts[0].Target == WorkspaceMount},
		{"kill on stop", cfg.StopSignal == "SIGKILL"},
		{"no stdin unless asked", !cfg.OpenStdin && !cfg.AttachStdin},
		{"the run's own outputs over their place in the workspace", len(withOut.Mounts) == 2 && withOut.Mounts[0] == host.Mounts[0] &&
			withOut.Mounts[1].Source == "/runs/r1" && withOut.Mounts[1].Target == "/workspace/outputs/r1" && !withOut.Mounts[1].ReadOnly},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("hardening broken: %s", c.name)
		}
	}
}

func TestLimitsValidate(t *testing.T) {
	tests := []struct {
		name    string
		limits  Limits
		wantErr bool
	}{
		{"defaults", Limits{}.WithDefaults(), false},
		{"tiny memory", Limits{Memory: 1 << 20}.WithDefaults(), true},
		{"tiny timeout", Limits{Timeout: time.Millisecond}.WithDefaults(), true},
		{"few pids", Limits{Pids: 2}.WithDefaults(), true},
		{"tiny output cap", Limits{OutputBytes: 10}.WithDefaults(), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.limits.Validate(); (err != nil) != tt.wantErr {
				t.Errorf("Validate() = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

func TestCapBuffer(t *testing.T) {
	var seen int
	c := &capBuffer{max: 10, onWrite: func(p []byte) { seen += len(p) }}
	for _, s := range []string{"hello", "world", "overflow"} {
		if n, err := c.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v; want %d, nil", s, n, err, len(s))
		}
	}
	got, cut := c.result()
	if got != "helloworld" || !cut || seen != 18 {
		t.Errorf("got %q cut=%v seen=%d; want %q cut=true seen=18", got, cut, seen, "helloworld")
	}
}
