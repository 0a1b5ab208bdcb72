package sandbox

import (
	"testing"
	"time"
)

// TestPoolTargetFollowsDemand: a key's target is the floor without demand,
// grows with the runs started in the last window and those running, stops
// at the ceiling, and falls back once the window has passed.
func TestPoolTargetFollowsDemand(t *testing.T) {
	pl := newPool(2, 6, nil, nil)
	t0 := time.Now()
	if got := pl.target("k", t0); got != 2 {
		t.Errorf("no demand: target %d; want the floor 2", got)
	}
	for i := range 4 {
		pl.started("k", t0.Add(time.Duration(i)*100*time.Millisecond))
	}
	if got := pl.target("k", t0.Add(time.Second)); got != 6 { // 4 recent + 4 running, capped
		t.Errorf("burst of 4 still running: target %d; want the ceiling 6", got)
	}
	pl.demand["k"].running = 0
	if got := pl.target("k", t0.Add(time.Second)); got != 4 {
		t.Errorf("4 recent runs, none running: target %d; want 4", got)
	}
	if got := pl.target("k", t0.Add(demandWindow+time.Second)); got != 2 {
		t.Errorf("after the window: target %d; want the floor 2", got)
	}
	if got := pl.target("other", t0); got != 2 {
		t.Errorf("another key: target %d; want the floor 2", got)
	}
	for range 100 {
		pl.started("k", t0)
	}
	if n := len(pl.demand["k"].starts); n > 2*pl.ceiling {
		t.Errorf("%d starts remembered; want at most %d", n, 2*pl.ceiling)
	}
}
