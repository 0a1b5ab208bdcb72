package kube

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pybox-dev/pybox/internal/contract"
)

// A server deletes each of its pods as soon as it ends (a probe's after
// reading its log), and gives up on one that has not started within
// startTimeout. A pybox pod still there reapAfter past either is an
// orphan: its server was killed (its runners end when their attach stream
// closes, a pool pod nobody spoke to within the runner's greeting bound),
// or its deletion failed. Any pybox sharing the namespace deletes it: the
// next server to start, or any live replica, every reapEvery.
const (
	reapAfter = 30 * time.Second
	reapEvery = 15 * time.Second
)

// ReapOrphans deletes the pybox pods of the namespace that ended more
// than reapAfter ago, or are still pending reapAfter past startTimeout,
// whoever created them, and returns how many it deleted. A pod running is
// never touched (its server may be alive, on another replica).
func (b *Backend) ReapOrphans(ctx context.Context) (int, error) {
	b.mu.Lock()
	b.lastReap = time.Now()
	b.mu.Unlock()
	list, err := b.cs.CoreV1().Pods(b.opts.Namespace).List(ctx, metav1.ListOptions{LabelSelector: contract.LabelManaged + "=true"})
	if err != nil {
		return 0, b.explain("list pods", err)
	}
	now, n := time.Now(), 0
	for _, p := range list.Items {
		if !orphaned(&p, now) {
			continue
		}
		if err := b.Remove(ctx, p.Name); err != nil {
			b.log.Warn("orphaned pod not deleted", "pod", p.Name, "err", err)
			continue
		}
		b.log.Info("deleted an orphaned pod", "pod", p.Name, "phase", p.Status.Phase, "owner", p.Labels[contract.LabelOwner], "host", p.Labels[contract.LabelHost])
		n++
	}
	return n, nil
}

// ReapOrphansEvery is ReapOrphans at most once every reapEvery (each
// tenant's sandbox asks, on its own clock); errors are logged.
func (b *Backend) ReapOrphansEvery(ctx context.Context) {
	b.mu.Lock()
	due := time.Since(b.lastReap) >= reapEvery
	b.mu.Unlock()
	if !due {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, teardownTimeout)
	defer cancel()
	if _, err := b.ReapOrphans(ctx); err != nil {
		b.log.Warn("could not look for orphaned pods", "err", err)
	}
}

// orphaned reports whether p is a pod no live server keeps (see reapAfter).
func orphaned(p *corev1.Pod, now time.Time) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	switch p.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		var end time.Time // when its container ended; else (evicted, say) when it was made
		for _, c := range p.Status.ContainerStatuses {
			if t := c.State.Terminated; t != nil && t.FinishedAt.After(end) {
				end = t.FinishedAt.Time
			}
		}
		if end.IsZero() {
			end = p.CreationTimestamp.Time
		}
		return now.Sub(end) > reapAfter
	case corev1.PodPending, "":
		return now.Sub(p.CreationTimestamp.Time) > startTimeout+reapAfter
	}
	return false
}
