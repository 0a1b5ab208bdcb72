// Command testreport renders `go test -json` for .ci/run: it copies the
// event stream to a file, prints what plain `go test` would print (each
// package's result line, the output of failing tests, build errors), and at
// the end prints a table of the setup steps' times and the slowest packages
// and tests, then each failed test's own messages (the lines a reader of
// only the output's end needs, when the failures' logs ran long).
//
//	GOFLAGS=-json go test ./... | testreport -json out.json -steps steps.txt
//	testreport -table out.json   # only the table, from a saved stream
//
// The steps file has one "NAME SECONDS" line per setup step.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	jsonOut := flag.String("json", "", "copy the event stream to this file")
	steps := flag.String("steps", "", "file of setup step times (NAME SECONDS per line)")
	table := flag.String("table", "", "print only the table, from this saved event stream")
	flag.Parse()
	if err := run(*jsonOut, *steps, *table); err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(1)
	}
}

func run(jsonOut, steps, table string) error {
	var in io.Reader = os.Stdin
	live := true
	if table != "" {
		f, err := os.Open(table)
		if err != nil {
			return fmt.Errorf("open event stream: %w", err)
		}
		defer f.Close()
		in, live = f, false
	}
	if jsonOut != "" {
		f, err := os.Create(jsonOut)
		if err != nil {
			return fmt.Errorf("create event copy: %w", err)
		}
		defer f.Close()
		in = io.TeeReader(in, f)
	}
	r := newRenderer(os.Stdout, live)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		r.line(sc.Bytes())
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read event stream: %w", err)
	}
	stepTimes, err := readSteps(steps)
	if err != nil {
		return err
	}
	printTable(os.Stdout, stepTimes, r.packages, r.tests, r.subtests)
	printFailures(os.Stdout, r.failures)
	return nil
}
