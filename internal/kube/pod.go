package kube

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/mount"
	"github.com/docker/go-units"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pybox-dev/pybox/internal/contract"
	"github.com/pybox-dev/pybox/internal/engine"
)

// ContainerName is the name of the one container of every pybox pod.
const ContainerName = "runner"

// ErrUnsupported: the spec asks for something a pod cannot honour (a host
// folder, a capability); nothing was created.
var ErrUnsupported = errors.New("not supported on the Kubernetes backend")

// PodOptions are the cluster-side choices the Docker spec does not carry.
type PodOptions struct {
	Namespace string
	// WorkspaceBytes sizes the emptyDir that stands for a host folder
	// mounted at /workspace (a session's folder). 0: unbounded.
	WorkspaceBytes int64
	// Owner, when set, is the pod the server runs in: its sandbox pods
	// name it as their owner, so the cluster's garbage collector removes
	// them when it goes.
	Owner *metav1.OwnerReference
}

// PodFor maps spec, the Docker shape of pybox's container contract
// (sandbox.ContainerConfig), to the Pod that honours it: the same image,
// command, user and environment; non-root, every capability dropped, no
// privilege escalation, a read-only root, the runtime's default seccomp
// profile, memory and CPU limits, no service-account token, no service
// links; tmpfs mounts become memory-backed emptyDirs of the same size, and
// the one host folder a pod can stand in for (/workspace) an emptyDir of
// its own. Network none becomes the deny-all NetworkPolicy the backend
// keeps for every pybox pod. Anything else it cannot honour is an
// ErrUnsupported error.
func PodFor(spec engine.Spec, o PodOptions) (*corev1.Pod, error) {
	cfg, host := spec.Config, spec.Host
	if cfg == nil || host == nil {
		return nil, errors.New("kube: a spec needs its config and host config")
	}
	if len(host.CapAdd) > 0 || host.Privileged || len(host.Devices) > 0 || host.PidMode != "" || (host.NetworkMode != "" && host.NetworkMode != "none") {
		return nil, fmt.Errorf("%w: added capabilities, privileges, devices, a shared PID namespace or network %q", ErrUnsupported, host.NetworkMode)
	}
	if !slices.Contains(host.CapDrop, "ALL") || !slices.Contains(host.SecurityOpt, "no-new-privileges") {
		return nil, fmt.Errorf("%w: a spec that keeps capabilities or allows privilege escalation", ErrUnsupported)
	}
	uid, gid, err := ids(cfg.User)
	if err != nil {
		return nil, err
	}
	name := spec.Name
	if name == "" {
		return nil, errors.New("kube: a pod needs a name")
	}
	labels, annotations := splitLabels(cfg.Labels)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: podName(name), Namespace: o.Namespace, Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  ptr(false),
			EnableServiceLinks:            ptr(false),
			TerminationGracePeriodSeconds: ptr(int64(0)),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsUser: &uid, RunAsGroup: &gid, RunAsNonRoot: ptr(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
		},
	}
	if o.Owner != nil {
		pod.OwnerReferences = []metav1.OwnerReference{*o.Owner}
	}
	if host.Runtime != "" {
		pod.Spec.RuntimeClassName = ptr(host.Runtime)
	}
	c := corev1.Container{
		Name:            ContainerName,
		Image:           cfg.Image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         cfg.Entrypoint,
		Args:            cfg.Cmd,
		WorkingDir:      cfg.WorkingDir,
		Stdin:           cfg.OpenStdin,
		StdinOnce:       cfg.OpenStdin, // the runner's stdin closes with pybox's attach stream: it ends when pybox is gone
		SecurityContext: &corev1.SecurityContext{
			RunAsUser: &uid, RunAsGroup: &gid, RunAsNonRoot: ptr(true),
			ReadOnlyRootFilesystem:   ptr(host.ReadonlyRootfs),
			AllowPrivilegeEscalation: ptr(false),
			Privileged:               ptr(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		TerminationMessagePath:   TerminationMessagePath,
	}
	for _, kv := range cfg.Env {
		k, v, _ := strings.Cut(kv, "=")
		c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: v})
	}
	if r := rlimits(host.Ulimits, host.PidsLimit); r != "" {
		c.Env = append(c.Env, corev1.EnvVar{Name: "PYBOX_RLIMITS", Value: r})
	}
	c.Resources, err = resources(host.Memory, host.NanoCPUs)
	if err != nil {
		return nil, err
	}
	for _, target := range slices.Sorted(maps.Keys(host.Tmpfs)) {
		size, err := tmpfsSize(host.Tmpfs[target])
		if err != nil {
			return nil, fmt.Errorf("kube: tmpfs %s: %w", target, err)
		}
		addVolume(pod, &c, target, &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: size})
	}
	for _, m := range host.Mounts {
		if m.Type != mount.TypeBind || m.Target != contract.Workspace {
			return nil, fmt.Errorf("%w: mounting %s at %s (a pod has no host folders; its workspace is its own)", ErrUnsupported, m.Source, m.Target)
		}
		// Memory-backed, as a stateless run's: a tmpfs of sizeLimit refuses
		// a write past it (ENOSPC); a disk-backed emptyDir is only evicted,
		// long after the node's disk took it.
		var size *resource.Quantity
		if o.WorkspaceBytes > 0 {
			size = resource.NewQuantity(o.WorkspaceBytes, resource.BinarySI)
		}
		addVolume(pod, &c, m.Target, &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: size})
	}
	pod.Spec.Containers = []corev1.Container{c}
	return pod, nil
}

// TerminationMessagePath is where the kubelet bind-mounts each container's
// termination-message file: a 0666 file on the node's disk, which a program
// could grow without bound at /dev/termination-log. Under /root (0700,
// root's, in pybox's images) the program's uid cannot reach it.
const TerminationMessagePath = "/root/.termination-log"

// rlimits is PYBOX_RLIMITS, the limits the runner sets on itself before
// the program starts ("fsize=N,nofile=N,nproc=N"): a pod has no ulimits of
// its own, and its pids bound is the node's choice. nproc counts the uid's
// processes and threads.
func rlimits(ulimits []*units.Ulimit, pids *int64) string {
	var out []string
	for _, u := range ulimits {
		if (u.Name == "fsize" || u.Name == "nofile") && u.Hard > 0 {
			out = append(out, fmt.Sprintf("%s=%d", u.Name, u.Hard))
		}
	}
	if pids != nil && *pids > 0 {
		out = append(out, fmt.Sprintf("nproc=%d", *pids))
	}
	return strings.Join(out, ",")
}

// addVolume mounts an emptyDir at target.
func addVolume(pod *corev1.Pod, c *corev1.Container, target string, src *corev1.EmptyDirVolumeSource) {
	name := fmt.Sprintf("v%d", len(pod.Spec.Volumes))
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: src}})
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: target})
}

// resources sets the limits; requests are the memory limit (a pod is not
// evicted for using what it was promised) and a tenth of the CPU limit
// (idle warm pods do not reserve whole cores).
func resources(memory, nanoCPUs int64) (corev1.ResourceRequirements, error) {
	if memory <= 0 || nanoCPUs <= 0 {
		return corev1.ResourceRequirements{}, errors.New("kube: a pod needs memory and CPU limits")
	}
	mem := resource.NewQuantity(memory, resource.BinarySI)
	cpu := resource.NewMilliQuantity(max(nanoCPUs/1e6, 1), resource.DecimalSI)
	req := resource.NewMilliQuantity(max(nanoCPUs/1e7, 1), resource.DecimalSI)
	return corev1.ResourceRequirements{
		Limits:   corev1.ResourceList{corev1.ResourceMemory: *mem, corev1.ResourceCPU: *cpu},
		Requests: corev1.ResourceList{corev1.ResourceMemory: *mem, corev1.ResourceCPU: *req},
	}, nil
}

// tmpfsSize reads size= from Docker tmpfs options.
func tmpfsSize(opts string) (*resource.Quantity, error) {
	for _, o := range strings.Split(opts, ",") {
		if v, ok := strings.CutPrefix(o, "size="); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				return nil, fmt.Errorf("size %q", v)
			}
			return resource.NewQuantity(n, resource.BinarySI), nil
		}
	}
	return nil, errors.New("no size: every tmpfs must be bounded")
}

// ids parses "uid:gid"; pods need numbers, never root.
func ids(user string) (int64, int64, error) {
	u, g, ok := strings.Cut(user, ":")
	uid, err1 := strconv.ParseInt(u, 10, 64)
	gid, err2 := strconv.ParseInt(g, 10, 64)
	if !ok || err1 != nil || err2 != nil || uid <= 0 || gid < 0 {
		return 0, 0, fmt.Errorf("kube: user %q: a pod needs a numeric, non-root uid:gid", user)
	}
	return uid, gid, nil
}

// labelValue is what Kubernetes accepts as a label value.
var labelValue = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)

// splitLabels keeps the labels Kubernetes accepts as labels and moves the
// others (a lease file's path) to annotations; List looks in both.
func splitLabels(in map[string]string) (labels, annotations map[string]string) {
	labels, annotations = map[string]string{}, map[string]string{}
	for k, v := range in {
		if len(v) <= 63 && labelValue.MatchString(v) {
			labels[k] = v
		} else {
			annotations[k] = v
		}
	}
	labels[contract.LabelManaged] = "true" // what the deny-all NetworkPolicy selects
	return labels, annotations
}

// podName makes a container name a pod name: lower case, at most 63.
func podName(name string) string {
	name = strings.ToLower(strings.TrimPrefix(name, "/"))
	if len(name) > 63 {
		name = name[:63]
	}
	return strings.TrimRight(name, "-.")
}

func ptr[T any](v T) *T { return &v }
