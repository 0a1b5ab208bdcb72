package sandbox

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/pybox-dev/pybox/internal/engine"
)

// probeTimeout bounds a probe; it only starts an interpreter and prints.
const probeTimeout = 60 * time.Second

// probeOutput is the least stdout a probe keeps, whatever the programs'
// output cap (an image's listing of packages, modules and the standard
// library: tens of KB).
const probeOutput = 1 << 20

// Probe runs a short trusted snippet with python in image, under the same
// security profile as user programs but with no workspace, and returns its
// stdout. A non-zero exit is an error carrying stderr.
func (s *Sandbox) Probe(ctx context.Context, image string, python []string, code string) (string, error) {
	ctx, stop := s.bound(ctx)
	defer stop()
	if err := s.acquire(ctx); err != nil {
		return "", err
	}
	defer s.slots.Release(1)
	plan := s.plan(Program{Image: image, Python: python}, "")
	plan.Cmd = append(append([]string{}, python...), "-c", code)
	stdout := &capBuffer{max: max(s.cfg.Limits.OutputBytes, probeOutput)}
	stderr := &capBuffer{max: 16 << 10}
	spec := engine.Spec{Name: s.owner.ContainerName("probe"), Timeout: probeTimeout, Stdout: stdout, Stderr: stderr}
	spec.Config, spec.Host = ContainerConfig(plan)
	spec.Config.Labels = s.labels("probe", plan) // trusted code: its uid needs no check
	exit, err := s.eng.Run(ctx, spec)
	out, _ := stdout.result()
	errText, _ := stderr.result()
	switch {
	case err != nil:
		return "", s.explain(err)
	case exit.TimedOut:
		return "", fmt.Errorf("probe timed out after %v", probeTimeout)
	case exit.Code != 0:
		return "", fmt.Errorf("exit status %d: %s", exit.Code, strings.TrimSpace(errText))
	}
	return out, nil
}
