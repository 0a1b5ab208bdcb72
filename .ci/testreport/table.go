package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

const slowest = 20

type step struct {
	Name    string
	Seconds float64
}

func readSteps(path string) ([]step, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open step times: %w", err)
	}
	defer f.Close()
	var steps []step
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 2 {
			continue
		}
		s, err := strconv.ParseFloat(fields[1], 64)
		if err != nil {
			return nil, fmt.Errorf("step time %q: %w", sc.Text(), err)
		}
		steps = append(steps, step{fields[0], s})
	}
	return steps, sc.Err()
}

// printTable prints the setup steps in order, every package and the
// slowest top-level tests, each with its seconds.
func printTable(w io.Writer, steps []step, packages, tests []timing, subtests int) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(w, "\n== .ci/run timings (seconds)")
	if len(steps) > 0 {
		fmt.Fprintln(tw, "setup step\tseconds\t")
		for _, s := range steps {
			fmt.Fprintf(tw, "%s\t%.1f\t\n", s.Name, s.Seconds)
		}
		tw.Flush()
		fmt.Fprintln(w)
	}
	byTime := func(a, b timing) int {
		if a.Seconds != b.Seconds {
			if a.Seconds > b.Seconds {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	}
	slices.SortFunc(packages, byTime)
	fmt.Fprintln(tw, "package\tseconds\tresult\t")
	for _, p := range packages {
		if p.Action != "skip" || p.Seconds > 0 {
			fmt.Fprintf(tw, "%s\t%.1f\t%s\t\n", shortPackage(p.Name), p.Seconds, p.Action)
		}
	}
	tw.Flush()
	slices.SortFunc(tests, byTime)
	n := min(slowest, len(tests))
	fmt.Fprintf(w, "\n%d slowest of %d top-level tests (and %d subtests)\n", n, len(tests), subtests)
	fmt.Fprintln(tw, "test\tseconds\tresult\t")
	for _, t := range tests[:n] {
		fmt.Fprintf(tw, "%s\t%.1f\t%s\t\n", t.Name, t.Seconds, t.Action)
	}
	tw.Flush()
}

// printFailures prints each failed test's messages, last, so the end of a
// long run's output says what failed and why.
func printFailures(w io.Writer, failures []string) {
	if len(failures) == 0 {
		return
	}
	fmt.Fprintf(w, "\n== failures (their messages; the whole output is above)\n")
	for _, f := range failures {
		fmt.Fprintln(w, f)
	}
}
