package main

import (
	"context"
	"fmt"
	"io"

	"github.com/pybox-dev/pybox/internal/app"
	"github.com/pybox-dev/pybox/internal/doctor"
)

func doctorCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := commandConfig("doctor")
	fs := newFlags("doctor", "pybox doctor [flags]", stderr, c)
	if err := parse(fs, c, args); err != nil {
		return exitCode(err, stderr)
	}
	// One self-test per runtime, each in a folder removed right after it: a
	// warm pool would refill for that folder while it goes (and leave an
	// empty outputs/ of it behind), and start containers nobody uses.
	c.WarmPool = 0
	a, err := app.New(ctx, &c.Config, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "pybox:", err)
		return 1
	}
	defer a.Close()
	if !doctor.Run(ctx, a, stdout) {
		return 1
	}
	return 0
}
