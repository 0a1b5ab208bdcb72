package main

import (
	"context"
	"io"

	"github.com/pybox-dev/pybox/internal/app"
	"github.com/pybox-dev/pybox/internal/bench"
)

func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := commandConfig("bench")
	fs := newFlags("bench", "pybox bench [flags]", stderr, c)
	var o bench.Options
	fs.IntVar(&o.N, "n", 20, "iterations per scenario; the load rows follow it (4 concurrent callers of 5n/4 calls each, 20 HTTP clients for n seconds)")
	fs.StringVar(&o.JSON, "json", "", "also write the JSON report to this file (\"-\" = stdout only JSON)")
	fs.BoolVar(&o.Eval, "eval", false, "measure `pybox eval` throughput instead (samples/s against a docker run loop and a pybox run loop of -n samples)")
	fs.IntVar(&o.EvalTrivial, "eval-trivial", 500, "with -eval: samples in the trivial batch")
	fs.IntVar(&o.EvalWork, "eval-work", 200, "with -eval: samples in the real-work batch")
	fs.BoolVar(&o.EvalFloor, "eval-floor", false, "measure `pybox eval --problems` on 164 trivial problems (1 and 5 samples each) against a docker run --rm loop and the floor (bare containers of true), --max-concurrent at once")
	fs.StringVar(&o.Kubeconfig, "kubernetes", "", "measure the Kubernetes backend instead, with this kubeconfig: warm, cold and session latency as pods (again under gVisor where the cluster has a RuntimeClass runsc or gvisor), beside the same rows on Docker")
	fs.BoolVar(&o.Egress, "egress", false, "measure one HTTPS request (new connection) from a program through pybox's egress proxy against the same request from the host, and a 100 MiB download through it")
	fs.BoolVar(&o.CodeMode, "codemode", false, "measure code mode instead: one workflow as three direct tool calls and as one execute_code calling them (time and context bytes)")
	if err := parse(fs, c, args); err != nil {
		return err
	}
	o.Forward, o.Version = c.forwardFlags(fs), version
	o.EvalForward, o.RunForward = forwardable("eval", o.Forward), forwardable("run", o.Forward)
	if err := o.Check(); err != nil { // before anything starts
		return err
	}
	a, err := app.New(ctx, &c.Config, stderr)
	if err != nil {
		return err
	}
	defer a.Close()
	return bench.Run(ctx, a, o, stdout, stderr)
}
