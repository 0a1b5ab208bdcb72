package testenv

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// CRISteps are when the node's containerd ran a pod's steps, read from
// its log (the CRI plugin logs each call and its return at info level):
// the pod sandbox (pause container and network) asked for and ready, the
// container asked for and created, and its start asked for and done.
type CRISteps struct {
	SandboxAsked, SandboxReady time.Time
	CreateAsked, Created       time.Time
	StartAsked, Started        time.Time
}

// CRISteps reads the steps of pod ns/name (its container named
// container) from the node's containerd log; it fails when one is missing.
func (n *Node) CRISteps(ns, name, container string) (CRISteps, error) {
	f, err := os.Open(filepath.Join(n.dir, "containerd.log"))
	if err != nil {
		return CRISteps{}, err
	}
	defer f.Close()
	return criSteps(bufio.NewScanner(f), ns, name, container)
}

func criSteps(sc *bufio.Scanner, ns, name, container string) (CRISteps, error) {
	var s CRISteps
	var sandbox, ctr string
	set := func(t *time.Time, at time.Time) {
		if t.IsZero() {
			*t = at
		}
	}
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		at, msg, ok := criLine(sc.Text())
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(msg, "RunPodSandbox for &PodSandboxMetadata{Name:"+name+",") && strings.Contains(msg, ",Namespace:"+ns+","):
			if _, id, found := strings.Cut(msg, "returns sandbox id "); found {
				sandbox = strings.Trim(id, `"`)
				set(&s.SandboxReady, at)
			} else {
				set(&s.SandboxAsked, at)
			}
		case sandbox != "" && strings.HasPrefix(msg, `CreateContainer within sandbox "`+sandbox+`" for container &ContainerMetadata{Name:`+container+","):
			set(&s.CreateAsked, at)
		case sandbox != "" && strings.HasPrefix(msg, `CreateContainer within sandbox "`+sandbox+`" for &ContainerMetadata{Name:`+container+","):
			if _, id, found := strings.Cut(msg, "returns container id "); found {
				ctr = strings.Trim(id, `"`)
				set(&s.Created, at)
			}
		case ctr != "" && msg == `StartContainer for "`+ctr+`"`:
			set(&s.StartAsked, at)
		case ctr != "" && msg == `StartContainer for "`+ctr+`" returns successfully`:
			set(&s.Started, at)
		}
	}
	if err := sc.Err(); err != nil {
		return s, err
	}
	for step, t := range map[string]time.Time{"sandbox asked": s.SandboxAsked, "sandbox ready": s.SandboxReady, "create asked": s.CreateAsked,
		"created": s.Created, "start asked": s.StartAsked, "started": s.Started} {
		if t.IsZero() {
			return s, fmt.Errorf("containerd's log has no %q step for pod %s/%s", step, ns, name)
		}
	}
	return s, nil
}

// criLine splits a containerd log line (logrus text: time="..." level=...
// msg="...") into its time and its message, unquoted.
func criLine(line string) (time.Time, string, bool) {
	rest, ok := strings.CutPrefix(line, `time="`)
	if !ok {
		return time.Time{}, "", false
	}
	ts, rest, ok := strings.Cut(rest, `"`)
	if !ok {
		return time.Time{}, "", false
	}
	at, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return time.Time{}, "", false
	}
	_, msg, ok := strings.Cut(rest, ` msg="`)
	if !ok {
		return time.Time{}, "", false
	}
	for i := 0; i < len(msg); i++ { // up to its closing quote
		switch msg[i] {
		case '\\':
			i++
		case '"':
			return at, strings.ReplaceAll(msg[:i], `\"`, `"`), true
		}
	}
	return time.Time{}, "", false
}

// KubeletSteps are when the node's kubelet took a pod's steps, read from
// its log; they are there only when it logs at verbosity 3 or more
// (PYBOX_K8S_KUBELET_V=3), else zero: the pod received from the API
// server, and the wait for its volumes begun and ended.
type KubeletSteps struct {
	Added, VolumesAsked, VolumesReady time.Time
}

// KubeletSteps reads the kubelet's steps for pod ns/name from its log.
func (n *Node) KubeletSteps(ns, name string) (KubeletSteps, error) {
	f, err := os.Open(filepath.Join(n.dir, "kubelet.log"))
	if err != nil {
		return KubeletSteps{}, err
	}
	defer f.Close()
	return kubeletSteps(bufio.NewScanner(f), ns+"/"+name, time.Now().Year()), nil
}

func kubeletSteps(sc *bufio.Scanner, pod string, year int) KubeletSteps {
	var s KubeletSteps
	set := func(t *time.Time, at time.Time) {
		if t.IsZero() {
			*t = at
		}
	}
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		at, ok := klogTime(line, year)
		if !ok || !strings.Contains(line, `"`+pod+`"`) {
			continue
		}
		switch {
		case strings.Contains(line, `"SyncLoop ADD"`):
			set(&s.Added, at)
		case strings.Contains(line, `"Waiting for volumes to attach and mount for pod"`):
			set(&s.VolumesAsked, at)
		case strings.Contains(line, `"All volumes are attached and mounted for pod"`):
			set(&s.VolumesReady, at)
		}
	}
	return s
}

// klogTime reads a klog line's time ("I1127 12:00:00.123456 ..."), in
// the local zone, which klog writes.
func klogTime(line string, year int) (time.Time, bool) {
	if len(line) < 21 || !strings.ContainsRune("IWEF", rune(line[0])) {
		return time.Time{}, false
	}
	at, err := time.ParseInLocation("0102 15:04:05.000000", line[1:21], time.Local)
	if err != nil {
		return time.Time{}, false
	}
	return at.AddDate(year, 0, 0), true
}
