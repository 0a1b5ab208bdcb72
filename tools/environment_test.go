package tools

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/pybox-dev/pybox/images"
	"github.com/pybox-dev/pybox/sandbox"
)

// TestEnvErrorInfraFirst: an environment check that could not run (busy,
// Docker gone, cancelled) is reported as that, not as a bad environment,
// even though the manager also marks it as one.
func TestEnvErrorInfraFirst(t *testing.T) {
	_, badEnv := images.Environment{Type: "pyenv"}.Normalize()
	h := &handlers{cfg: Config{Log: slog.New(slog.DiscardHandler)}}
	tests := []struct {
		cause error
		want  string
	}{
		{sandbox.ErrBusy, "busy"},
		{sandbox.ErrUnreachable, "Docker is not reachable"},
		{context.Canceled, "cancelled"},
	}
	for _, tt := range tests {
		err := h.envError(t.Context(), "configure the environment", fmt.Errorf("%w: Python does not start: %w", badEnv, tt.cause))
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "does not start") {
			t.Errorf("envError(bad environment wrapping %v) = %v; want a message about %q only", tt.cause, err, tt.want)
		}
	}
}

// TestEnvErrorLayerBudget: an install refused for the owner's package
// layer budget reaches the model as it is (how much, the budget, what to
// do), not as an internal failure with an id.
func TestEnvErrorLayerBudget(t *testing.T) {
	h := &handlers{cfg: Config{Log: slog.New(slog.DiscardHandler)}}
	cause := fmt.Errorf("%w: the package layers of this owner hold 2MiB and this install adds 8MiB, past their budget of 6MiB", images.ErrLayerBudget)
	err := h.envError(t.Context(), "install packages", cause)
	if err == nil || !strings.Contains(err.Error(), "past their budget of 6MiB") || strings.Contains(err.Error(), "internal failure") {
		t.Errorf("envError(layer budget) = %v; want the budget's message itself", err)
	}
}
