package eval

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// progressBar draws `pybox eval`'s progress on one terminal line of
// stderr, at most ten times a second; off, it draws nothing.
type progressBar struct {
	w     io.Writer
	on    bool
	mu    sync.Mutex
	total int
	from  int // results there before this run
	began time.Time
	last  time.Time
	drawn bool
}

// newProgressBar: mode auto draws when w is a terminal.
func newProgressBar(w io.Writer, mode string) *progressBar {
	on := mode == "always"
	if mode == "auto" {
		f, ok := w.(*os.File)
		if ok {
			fi, err := f.Stat()
			on = err == nil && fi.Mode()&os.ModeCharDevice != 0
		}
	}
	return &progressBar{w: w, on: on}
}

func (b *progressBar) start(total, from int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total, b.from, b.began = total, from, time.Now()
}

// update redraws after a result; ran counts this run's results.
func (b *progressBar) update(t Tally, ran int) {
	if !b.on {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	done := b.from + ran
	if now.Sub(b.last) < 100*time.Millisecond && done < b.total {
		return
	}
	b.last = now
	const width = 30
	fill := 0
	if b.total > 0 {
		fill = width * done / b.total
	}
	rate := float64(ran) / now.Sub(b.began).Seconds()
	eta := "?"
	if rate > 0 {
		eta = time.Duration(float64(b.total-done) / rate * float64(time.Second)).Round(time.Second).String()
	}
	fmt.Fprintf(b.w, "\r[%s%s] %d/%d  passed %d  failed %d  timeout %d  oom %d  other %d  %.1f/s  ETA %s\x1b[K",
		strings.Repeat("=", fill), strings.Repeat(" ", width-fill), done, b.total,
		t.Passed, t.Failed, t.TimedOut, t.OOM, t.Other, rate, eta)
	b.drawn = true
}

// finish ends the bar's line, so what follows starts on its own.
func (b *progressBar) finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.drawn {
		fmt.Fprintln(b.w)
	}
}
