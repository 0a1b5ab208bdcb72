package logcap

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestRepeatedMessagesAreRateLimited(t *testing.T) {
	var buf bytes.Buffer
	h := New(slog.NewTextHandler(&buf, nil))
	now := time.Unix(1000, 0)
	h.state.now = func() time.Time { return now }
	log := slog.New(h)
	for range 10_000 {
		log.Warn("runner ended during a program", "err", "boom")
	}
	log.Info("another message")
	if n := strings.Count(buf.String(), "runner ended"); n != Burst {
		t.Fatalf("%d records of a message logged 10,000 times at once; want the burst of %d", n, Burst)
	}
	if !strings.Contains(buf.String(), "another message") {
		t.Fatal("a different message was suppressed too")
	}
	buf.Reset()
	now = now.Add(Interval)
	log.Warn("runner ended during a program", "err", "boom")
	if !strings.Contains(buf.String(), "suppressed_since_last=9980") {
		t.Fatalf("the next record after the pause does not count what was left out: %s", buf.String())
	}
	// Over a minute of flooding, the log grows by a bounded amount.
	buf.Reset()
	for i := range 60_000 {
		now = now.Add(time.Millisecond)
		log.Warn("runner ended during a program", "i", i)
	}
	if n := strings.Count(buf.String(), "\n"); n > Burst+int(time.Minute/Interval)+1 {
		t.Fatalf("%d lines in a minute of flooding", n)
	}
}

func TestLongValuesAreCut(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(New(slog.NewTextHandler(&buf, nil))).With("ctx", strings.Repeat("c", 5000))
	log.Error(strings.Repeat("m", 5000), "err", errors.New(strings.Repeat("e", 1<<20)), "s", strings.Repeat("é", 1<<20),
		slog.Group("g", "inner", strings.Repeat("i", 5000)))
	if buf.Len() > 6*MaxValue+1000 {
		t.Fatalf("a record with 2 MiB of values wrote %d bytes", buf.Len())
	}
	for _, want := range []string{"ctx=" + strings.Repeat("c", 10), "[cut]", "g.inner="} {
		if !strings.Contains(buf.String(), want) {
			t.Fatalf("record lacks %q: %.300s", want, buf.String())
		}
	}
}
