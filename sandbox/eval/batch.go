package eval

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// Batch is a batch run for the command line: its results go, in input
// order, to a results file that a batch interrupted and run again
// resumes, with a progress bar and a summary on Log.
type Batch struct {
	Samples []*Sample
	Log     io.Writer // stderr: resume notes, progress, summary
	Format  Format    // of the results (nil: Native)
	start   time.Time
	todo    []*Sample // those without a result yet
	out     io.WriteCloser
	bar     *progressBar
	tally   Tally           // every result in the output, earlier runs' included
	passed  map[string]bool // by sample key: every result in the output
	ran     int             // results written by this run
}

// NewBatch starts the clock of a batch of samples. progress is when to
// draw the progress bar on log: auto (when log is a terminal), always,
// never.
func NewBatch(samples []*Sample, log io.Writer, progress string) *Batch {
	return &Batch{Samples: samples, Log: log, Format: Native{}, start: time.Now(), todo: samples, passed: map[string]bool{},
		bar: newProgressBar(log, progress)}
}

// Todo are the samples without a result yet.
func (b *Batch) Todo() []*Sample { return b.todo }

// OpenResults opens where results go: path, or stdout for "" or "-". A
// results file that exists is read back: the ids it has are not run
// again, a cut-off last line (the batch was killed mid-write) is
// dropped, and new results are appended. A file that is not this batch's
// results is an *InputError.
func (b *Batch) OpenResults(path string, stdout io.Writer) error {
	b.todo = b.Samples
	if path == "" || path == "-" {
		b.out = nopWriteCloser{stdout}
		return nil
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("results file: %w", err)
	}
	done, keep, err := b.readResults(f, path)
	if err == nil {
		err = f.Truncate(keep)
	}
	if err == nil {
		_, err = f.Seek(keep, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return err
	}
	if len(done) > 0 {
		b.todo = nil
		for _, s := range b.Samples {
			if !done[s.key] {
				b.todo = append(b.todo, s)
			}
		}
		fmt.Fprintf(b.Log, "pybox eval: resuming %s: %d of %d samples have results, %d to run\n", path, len(b.Samples)-len(b.todo), len(b.Samples), len(b.todo))
	}
	b.out = f
	return nil
}

// readResults reads a results file being resumed: which ids it has, and
// the length of its valid part (whole result lines). Only its last line
// may be cut off (the batch was killed while writing it): it is dropped.
func (b *Batch) readResults(f *os.File, path string) (map[string]bool, int64, error) {
	inBatch := map[string]bool{}
	for _, s := range b.Samples {
		inBatch[s.key] = true
	}
	done := map[string]bool{}
	var keep int64
	var bad *InputError
	pos := 0
	err := eachLine(f, func(n int, line []byte, end int64, terminated bool) error {
		if bad != nil { // a bad line with more after it: not a cut-off last line
			return bad
		}
		where := fmt.Sprintf("results file %s, line %d", path, n)
		key, r, err := b.Format.Decode(pos, line)
		pos++
		if err == nil && !terminated {
			err = errors.New("no newline at its end")
		}
		if err != nil {
			bad = &InputError{where, "not a pybox eval result (" + err.Error() + "); use another -o file"}
			return nil
		}
		if !inBatch[key] {
			return &InputError{where, fmt.Sprintf("id %s is not in this batch: is the file another batch's results? use another -o file", key)}
		}
		if done[key] {
			return &InputError{where, fmt.Sprintf("a second result for id %s: use another -o file", key)}
		}
		done[key] = true
		b.tally.Add(r)
		b.passed[key] = r.Passed
		keep = end
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	if bad != nil {
		fmt.Fprintf(b.Log, "pybox eval: %s: its last line is cut off (the batch was stopped while writing it); dropped\n", path)
	}
	return done, keep, nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// Close closes the results file.
func (b *Batch) Close() error {
	if b.out == nil {
		return nil
	}
	return b.out.Close()
}

// Run runs the samples still to do (Run, with opts) and writes each
// result as it comes, then the summary. It returns nil when the batch
// ran to its end, ctx's error when it was interrupted, else why it
// stopped (an *InputError for a requirement that is not valid).
func (b *Batch) Run(ctx context.Context, opts Options) error {
	if len(b.todo) == 0 {
		b.Summary(nil)
		return nil
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	b.bar.start(len(b.Samples), len(b.Samples)-len(b.todo))
	var fatal, writeErr error
	for o := range Run(runCtx, b.todo, opts) {
		switch {
		case o.Err != nil:
			fatal = o.Err
		case writeErr == nil:
			if writeErr = b.write(o.Sample, o.Result); writeErr != nil {
				stop()
			}
		}
	}
	b.bar.finish()
	var ie *InputError
	switch {
	case errors.As(fatal, &ie):
		return fatal
	case writeErr != nil:
		fmt.Fprintln(b.Log, "pybox eval: writing results:", writeErr)
		b.Summary(nil)
		return fmt.Errorf("writing results: %w", writeErr)
	case fatal != nil:
		fmt.Fprintln(b.Log, "pybox eval: stopped: pybox could not run", fatal)
		b.Summary(fatal)
		return fatal
	case ctx.Err() != nil:
		b.Summary(ctx.Err())
		return ctx.Err()
	}
	b.Summary(nil)
	return nil
}

// write appends one result line.
func (b *Batch) write(s *Sample, r Result) error {
	line, err := b.Format.Encode(s, r)
	if err != nil {
		return err
	}
	if _, err := b.out.Write(append(line, '\n')); err != nil {
		return err
	}
	b.tally.Add(r)
	b.passed[s.key] = r.Passed
	b.ran++
	b.bar.update(b.tally, b.ran)
	return nil
}

// Summary reports the batch on Log; stopped is why it ended early.
func (b *Batch) Summary(stopped error) {
	t := b.tally
	wall := time.Since(b.start)
	rate := float64(b.ran) / wall.Seconds()
	fmt.Fprintf(b.Log, "pybox eval: %d of %d samples have results (%d run now): %d passed, %d failed, %d timed out, %d out of memory, %d other errors; %.1f s, %.1f samples/s\n",
		t.Total(), len(b.Samples), b.ran, t.Passed, t.Failed, t.TimedOut, t.OOM, t.Other, wall.Seconds(), rate)
	if stopped != nil {
		fmt.Fprintf(b.Log, "pybox eval: stopped before the end (%v): the results file holds whole results only; run the same command again (with -o FILE) to go on\n", stopped)
	}
}

// Tasks counts, per task, the samples with a result and those that
// passed; ok is false while some sample has no result yet.
func (b *Batch) Tasks() (tasks map[string]TaskCount, ok bool) {
	tasks = map[string]TaskCount{}
	for _, s := range b.Samples {
		passed, done := b.passed[s.key]
		if !done {
			return nil, false
		}
		t := tasks[s.Task]
		t.N++
		if passed {
			t.C++
		}
		tasks[s.Task] = t
	}
	return tasks, true
}
