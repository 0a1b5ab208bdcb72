package testenv

import (
	"bufio"
	"strings"
	"testing"
	"time"
)

// TestCRISteps: a pod's steps are read from containerd's log lines (its
// CRI plugin's, at info level), those of another pod (one of the same name
// in another namespace too) and another container are not taken, and a
// missing step is an error.
func TestCRISteps(t *testing.T) {
	log := `time="2026-11-27T11:00:00.100000000Z" level=info msg="RunPodSandbox for &PodSandboxMetadata{Name:cold-a,Uid:u9,Namespace:ns2,Attempt:0,}"
time="2026-11-27T11:00:00.100000000Z" level=info msg="RunPodSandbox for &PodSandboxMetadata{Name:cold-a,Uid:u9,Namespace:ns2,Attempt:0,} returns sandbox id \"s9\""
time="2026-11-27T12:00:00.100000000Z" level=info msg="RunPodSandbox for &PodSandboxMetadata{Name:other,Uid:u0,Namespace:ns,Attempt:0,}"
time="2026-11-27T12:00:00.200000000Z" level=info msg="RunPodSandbox for &PodSandboxMetadata{Name:cold-a,Uid:u1,Namespace:ns,Attempt:0,}"
time="2026-11-27T12:00:00.300000000Z" level=info msg="RunPodSandbox for &PodSandboxMetadata{Name:other,Uid:u0,Namespace:ns,Attempt:0,} returns sandbox id \"s0\""
time="2026-11-27T12:00:00.450000000Z" level=info msg="RunPodSandbox for &PodSandboxMetadata{Name:cold-a,Uid:u1,Namespace:ns,Attempt:0,} returns sandbox id \"s1\""
time="2026-11-27T12:00:00.460000000Z" level=info msg="CreateContainer within sandbox \"s0\" for container &ContainerMetadata{Name:runner,Attempt:0,}"
time="2026-11-27T12:00:00.470000000Z" level=info msg="CreateContainer within sandbox \"s1\" for container &ContainerMetadata{Name:runner,Attempt:0,}"
time="2026-11-27T12:00:00.520000000Z" level=info msg="CreateContainer within sandbox \"s1\" for &ContainerMetadata{Name:runner,Attempt:0,} returns container id \"c1\""
time="2026-11-27T12:00:00.530000000Z" level=info msg="StartContainer for \"c1\""
time="2026-11-27T12:00:00.600000000Z" level=info msg="StartContainer for \"c1\" returns successfully" extra="x"
`
	got, err := criSteps(bufio.NewScanner(strings.NewReader(log)), "ns", "cold-a", "runner")
	if err != nil {
		t.Fatal(err)
	}
	at := func(ms int) time.Time { return time.Date(2026, 11, 27, 12, 0, 0, ms*1e6, time.UTC) }
	want := CRISteps{SandboxAsked: at(200), SandboxReady: at(450), CreateAsked: at(470), Created: at(520), StartAsked: at(530), Started: at(600)}
	if got != want {
		t.Errorf("steps %+v\nwant %+v", got, want)
	}
	cut := log[:strings.Index(log, `time="2026-11-27T12:00:00.600`)]
	if _, err := criSteps(bufio.NewScanner(strings.NewReader(cut)), "ns", "cold-a", "runner"); err == nil || !strings.Contains(err.Error(), "started") {
		t.Errorf("no start in the log: %v; want an error naming the step", err)
	}
	if _, err := criSteps(bufio.NewScanner(strings.NewReader(log)), "ns", "cold-a", "sidecar"); err == nil {
		t.Error("another container's steps were taken")
	}
}

// TestKubeletSteps: a pod's kubelet steps are read from klog lines at
// verbosity 3, another pod's are not taken.
func TestKubeletSteps(t *testing.T) {
	log := `I1127 12:00:00.010000    4242 kubelet.go:2515] "SyncLoop ADD" source="api" pods=["ns/other"]
I1127 12:00:00.020000    4242 kubelet.go:2515] "SyncLoop ADD" source="api" pods=["ns/cold-a"]
I1127 12:00:00.030000    4242 volume_manager.go:421] "Waiting for volumes to attach and mount for pod" pod="ns/cold-a"
I1127 12:00:00.040000    4242 volume_manager.go:482] "All volumes are attached and mounted for pod" pod="ns/other"
I1127 12:00:00.330000    4242 volume_manager.go:482] "All volumes are attached and mounted for pod" pod="ns/cold-a"
`
	got := kubeletSteps(bufio.NewScanner(strings.NewReader(log)), "ns/cold-a", 2026)
	at := func(ms int) time.Time { return time.Date(2026, 11, 27, 12, 0, 0, ms*1e6, time.Local) }
	want := KubeletSteps{Added: at(20), VolumesAsked: at(30), VolumesReady: at(330)}
	if !got.Added.Equal(want.Added) || !got.VolumesAsked.Equal(want.VolumesAsked) || !got.VolumesReady.Equal(want.VolumesReady) {
		t.Errorf("steps %+v\nwant %+v", got, want)
	}
}
