package app

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/pybox-dev/pybox/internal/kube"
)

// acceptUnenforced parses PYBOX_K8S_ACCEPT_UNENFORCED: the start checks
// (kube.CheckNetworkPolicy, kube.CheckPids) the operator accepts a cluster
// failing.
func acceptUnenforced(s string) ([]string, error) {
	known := []string{kube.CheckNetworkPolicy, kube.CheckPids}
	var out []string
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		if !slices.Contains(known, f) {
			return nil, fmt.Errorf("PYBOX_K8S_ACCEPT_UNENFORCED %q: use %s, separated by commas", f, strings.Join(known, " and "))
		}
		out = append(out, f)
	}
	return out, nil
}

// checkCluster runs the start checks on the cluster, logs what they found,
// and refuses a cluster that fails one the operator did not accept.
func (c *Config) checkCluster(ctx context.Context, kb *kube.Backend, image string, log *slog.Logger) error {
	accepted, err := acceptUnenforced(c.K8sAccept)
	if err != nil {
		return err
	}
	got := kb.CheckCluster(ctx, kube.ProbeImage{Image: image, Runtime: c.Runtime})
	failed := got.Failed()
	if got.Err != nil {
		log.Warn("kubernetes: the start checks could not run", "namespace", kb.Namespace(), "err", got.Err)
	} else {
		log.Info("kubernetes: start checks", "namespace", kb.Namespace(),
			"networkpolicy_enforced", got.NetworkPolicy, "probe_connection", got.Network,
			"pids_bounded", got.PidsBounded, "pids_bound", got.Pids)
	}
	var refused []string
	for _, f := range failed {
		if slices.Contains(accepted, f) {
			log.Warn("kubernetes: serving on a cluster that fails a start check, as PYBOX_K8S_ACCEPT_UNENFORCED allows", "check", f)
		} else {
			refused = append(refused, f)
		}
	}
	if len(refused) == 0 {
		return nil
	}
	why := map[string]string{
		kube.CheckNetworkPolicy: "its network plugin does not enforce the deny-all NetworkPolicy (a probe pod connected to another): sandboxes could reach each other and the network",
		kube.CheckPids:          "its pods have no processes bound (no podPidsLimit on the kubelet): a program could take the node's PIDs",
	}
	var reasons []string
	for _, f := range refused {
		reasons = append(reasons, why[f])
	}
	if got.Err != nil {
		reasons = []string{fmt.Sprintf("the checks could not run (%v)", got.Err)}
	}
	return fmt.Errorf("kubernetes: refusing to run untrusted code on this cluster: %s. Make the cluster enforce it, or accept it with PYBOX_K8S_ACCEPT_UNENFORCED=%s (--k8s-accept-unenforced)",
		strings.Join(reasons, "; "), strings.Join(refused, ","))
}
