package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/pybox-dev/pybox/internal/engine"
)

// TestTerminatedExit: an OOM kill is exit 137 on every runtime (gVisor's
// killed sandbox reports 128); other exits are the container's own.
func TestTerminatedExit(t *testing.T) {
	for _, tt := range []struct {
		st   corev1.ContainerStateTerminated
		want engine.Exit
	}{
		{corev1.ContainerStateTerminated{ExitCode: 128, Reason: "OOMKilled"}, engine.Exit{Code: 137, OOMKilled: true}},
		{corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}, engine.Exit{Code: 137, OOMKilled: true}},
		{corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}, engine.Exit{Code: 3}},
		{corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}, engine.Exit{Code: 0}},
	} {
		if got := terminatedExit(&tt.st); got != tt.want {
			t.Errorf("terminatedExit(%d %s) = %+v, want %+v", tt.st.ExitCode, tt.st.Reason, got, tt.want)
		}
	}
}
