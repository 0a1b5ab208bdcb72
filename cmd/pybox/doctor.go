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
