package tools

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// progressEvery is the least time between two progress notifications.
const progressEvery = 250 * time.Millisecond

// maxProgressText caps the output carried by one notification.
const maxProgressText = 8 << 10

// progress streams a running program's output to the client as MCP
// progress notifications, batched and rate-limited. Its goroutine is
// owned by the progress value: stop waits for it.
type progress struct {
	ctx   context.Context
	req   *mcp.CallToolRequest
	token any

	mu      sync.Mutex
	pending strings.Builder
	dropped bool
	n       float64

	quit chan struct{}
	wg   sync.WaitGroup
}

// startProgress returns nil when the client asked for no progress.
func startProgress(ctx context.Context, req *mcp.CallToolRequest) *progress {
	if req == nil || req.Session == nil || req.Params == nil || req.Params.GetProgressToken() == nil {
		return nil
	}
	p := &progress{ctx: ctx, req: req, token: req.Params.GetProgressToken(), quit: make(chan struct{})}
	p.wg.Add(1)
	go p.loop()
	return p
}

// onOutput is the sandbox's output hook; it never blocks on the network.
func (p *progress) onOutput(stream string, chunk []byte) {
	if p == nil {
		return
	}
	if stream == "stderr" {
		chunk = append([]byte("[stderr] "), chunk...)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if room := maxProgressText - p.pending.Len(); len(chunk) > room {
		chunk, p.dropped = chunk[:max(room, 0)], true
	}
	p.pending.Write(chunk)
}

func (p *progress) loop() {
	defer p.wg.Done()
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			p.flush()
		case <-p.quit:
			p.flush()
			return
		}
	}
}

// flush sends what accumulated since the last notification, if anything.
func (p *progress) flush() {
	p.mu.Lock()
	text, dropped := p.pending.String(), p.dropped
	p.pending.Reset()
	p.dropped = false
	if text == "" {
		p.mu.Unlock()
		return
	}
	p.n++
	n := p.n
	p.mu.Unlock()
	if dropped {
		text += "\n[pybox: more output than progress notifications carry; the full output is in the result]"
	}
	// A failed notification only costs the client a progress line.
	_ = p.req.Session.NotifyProgress(p.ctx, &mcp.ProgressNotificationParams{ProgressToken: p.token, Progress: n, Message: text})
}

// stop sends the last batch and waits for the goroutine.
func (p *progress) stop() {
	if p == nil {
		return
	}
	close(p.quit)
	p.wg.Wait()
}

// hook returns the sandbox output hook, or nil without progress.
func (p *progress) hook() func(string, []byte) {
	if p == nil {
		return nil
	}
	return p.onOutput
}
