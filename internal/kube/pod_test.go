package kube

import (
	"errors"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/go-units"
	corev1 "k8s.io/api/core/v1"

	"github.com/pybox-dev/pybox/internal/contract"
	"github.com/pybox-dev/pybox/internal/engine"
)

func spec() engine.Spec {
	host := contract.Hardened("none")
	host.ReadonlyRootfs = true
	host.Tmpfs = map[string]string{"/tmp": "rw,size=1048576"}
	pids := int64(32)
	host.Resources = container.Resources{Memory: 256 << 20, NanoCPUs: 5e8, PidsLimit: &pids,
		Ulimits: []*units.Ulimit{{Name: "fsize", Soft: 1 << 20, Hard: 1 << 20}, {Name: "nofile", Soft: 64, Hard: 64}, {Name: "core"}}}
	return engine.Spec{Name: "/Pybox-run-x-1", Config: &container.Config{Image: "img", User: "10001:10001", Cmd: []string{"python"},
		Labels: map[string]string{contract.LabelOwner: "x", contract.LabelLease: "/a/b.lock"}}, Host: host}
}

// TestPodForRefuses: what a pod cannot honour is an error, never dropped.
func TestPodForRefuses(t *testing.T) {
	for name, edit := range map[string]func(*engine.Spec){
		"an added capability":  func(s *engine.Spec) { s.Host.CapAdd = []string{"NET_ADMIN"} },
		"capabilities kept":    func(s *engine.Spec) { s.Host.CapDrop = nil },
		"privilege escalation": func(s *engine.Spec) { s.Host.SecurityOpt = nil },
		"privileged":           func(s *engine.Spec) { s.Host.Privileged = true },
		"a network":            func(s *engine.Spec) { s.Host.NetworkMode = "host" },
		"root":                 func(s *engine.Spec) { s.Config.User = "0:0" },
		"a user name":          func(s *engine.Spec) { s.Config.User = "pybox" },
		"no memory limit":      func(s *engine.Spec) { s.Host.Memory = 0 },
		"an unbounded tmpfs":   func(s *engine.Spec) { s.Host.Tmpfs["/x"] = "rw,mode=1777" },
		"a host folder elsewhere": func(s *engine.Spec) {
			s.Host.Mounts = []mount.Mount{{Type: mount.TypeBind, Source: "/etc", Target: "/etc2"}}
		},
		"a volume at the workspace": func(s *engine.Spec) {
			s.Host.Mounts = []mount.Mount{{Type: mount.TypeVolume, Source: "v", Target: "/workspace"}}
		},
		"no name":        func(s *engine.Spec) { s.Name = "" },
		"no host config": func(s *engine.Spec) { s.Host = nil },
	} {
		s := spec()
		edit(&s)
		if pod, err := PodFor(s, PodOptions{Namespace: "ns"}); err == nil {
			t.Errorf("%s: accepted: %+v", name, pod.Spec)
		}
	}
	s := spec()
	s.Host.CapAdd = []string{"SYS_ADMIN"}
	if _, err := PodFor(s, PodOptions{}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("an added capability: %v, want ErrUnsupported", err)
	}
}

// TestPodForMaps: names, labels, the workspace folder and limits.
func TestPodForMaps(t *testing.T) {
	s := spec()
	s.Host.Mounts = []mount.Mount{{Type: mount.TypeBind, Source: "/state/sessions/k", Target: "/workspace"}}
	pod, err := PodFor(s, PodOptions{Namespace: "ns", WorkspaceBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Name != "pybox-run-x-1" || pod.Namespace != "ns" {
		t.Errorf("name %q namespace %q", pod.Name, pod.Namespace)
	}
	if pod.Labels[contract.LabelOwner] != "x" || pod.Labels[contract.LabelManaged] != "true" || pod.Annotations[contract.LabelLease] != "/a/b.lock" {
		t.Errorf("labels %v annotations %v", pod.Labels, pod.Annotations)
	}
	if _, bad := pod.Labels[contract.LabelLease]; bad {
		t.Error("a path as a label value: the API server refuses it")
	}
	c := pod.Spec.Containers[0]
	if got := c.Resources.Limits.Cpu().MilliValue(); got != 500 {
		t.Errorf("cpu limit %dm, want 500m", got)
	}
	if got := c.Resources.Requests.Cpu().MilliValue(); got != 50 {
		t.Errorf("cpu request %dm, want 50m", got)
	}
	var ws string
	for _, m := range c.VolumeMounts {
		if m.MountPath == "/workspace" {
			for _, v := range pod.Spec.Volumes {
				if v.Name == m.Name && v.EmptyDir != nil && v.EmptyDir.SizeLimit != nil && v.EmptyDir.Medium == corev1.StorageMediumMemory {
					ws = v.EmptyDir.SizeLimit.String()
				}
			}
		}
	}
	if ws != "1Gi" {
		t.Errorf("the session folder's emptyDir: size %q, want 1Gi, memory-backed", ws)
	}
	if c.TerminationMessagePath != TerminationMessagePath {
		t.Errorf("termination message at %q, reachable by the program", c.TerminationMessagePath)
	}
	var rl string
	for _, e := range c.Env {
		if e.Name == "PYBOX_RLIMITS" {
			rl = e.Value
		}
	}
	if rl != "fsize=1048576,nofile=64,nproc=32" {
		t.Errorf("PYBOX_RLIMITS %q", rl)
	}
	if long := podName(strings.Repeat("a", 80) + "-"); len(long) > 63 {
		t.Errorf("pod name of %d characters", len(long))
	}
}

// TestChecksRead: the probe's pids line and what fails.
func TestChecksRead(t *testing.T) {
	for _, tt := range []struct {
		line string
		ok   bool
		want string
	}{
		{"512", true, "pids.max 512"},
		{"threads 1021", true, "1021 threads"},
		{"max", false, "none up to 4200 threads"},
	} {
		if ok, got := pidsBound(tt.line); ok != tt.ok || got != tt.want {
			t.Errorf("pidsBound(%q) = %v %q, want %v %q", tt.line, ok, got, tt.ok, tt.want)
		}
	}
	if got := (Checks{NetworkPolicy: true, PidsBounded: true}).Failed(); len(got) != 0 {
		t.Errorf("a cluster that passes fails %v", got)
	}
	if got := (Checks{NetworkPolicy: true, PidsBounded: true, Err: ErrUnreachable}).Failed(); len(got) != 2 {
		t.Errorf("a probe that could not run fails %v, want both", got)
	}
	// The probe's thousands of threads must not count against the
	// sandboxes' RLIMIT_NPROC, which counts their uid's tasks node-wide (a
	// probe as 10001 made the runners of another server on the node fail
	// to fork: EAGAIN).
	if u := probeSpec("p", ProbeImage{Image: "i"}, "").Config.User; strings.HasPrefix(u, strings.Split(contract.SandboxUser, ":")[0]+":") {
		t.Errorf("probe pods run as %s, the sandboxes' uid", u)
	}
}
