package serve

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/pybox-dev/pybox/internal/app"
)

// tokenSet maps bearer tokens (by their SHA-256) to tenants.
type tokenSet struct {
	tenants []string
	sums    [][32]byte
}

// loadTokens reads a tokens file for the server's start: one "TENANT
// TOKEN" per line; blank lines and lines starting with # are skipped. A
// tenant may have several tokens; a token belongs to one tenant. Any
// broken line, or no token at all, is an error.
func loadTokens(path string) (*tokenSet, error) {
	ts, broken, err := parseTokens(path)
	if err != nil {
		return nil, err
	}
	if err := errors.Join(broken...); err != nil {
		return nil, err
	}
	if len(ts.sums) == 0 {
		return nil, fmt.Errorf("tokens file %s has no tokens", path)
	}
	return ts, nil
}

// parseTokens reads a tokens file into the set of its valid lines, and
// says why each other line is broken. A token on two lines is on neither
// (which tenant it names is not clear). err is set only when the file
// cannot be read.
func parseTokens(path string) (*tokenSet, []error, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("tokens file: %w", err)
	}
	var broken []error
	type entry struct {
		tenant string
		line   int
	}
	byToken := map[[32]byte][]entry{}
	var order [][32]byte
	for i, line := range strings.Split(string(b), "\n") {
		tenant, token, err := tokenLine(strings.TrimSpace(line))
		if err != nil {
			broken = append(broken, fmt.Errorf("tokens file %s, line %d: %w", path, i+1, err))
		}
		if err != nil || tenant == "" {
			continue
		}
		sum := sha256.Sum256([]byte(token))
		if byToken[sum] == nil {
			order = append(order, sum)
		}
		byToken[sum] = append(byToken[sum], entry{tenant, i + 1})
	}
	ts := &tokenSet{}
	for _, sum := range order {
		if e := byToken[sum]; len(e) > 1 {
			broken = append(broken, fmt.Errorf("tokens file %s, line %d: the same token as line %d: a token names one tenant", path, e[1].line, e[0].line))
			continue
		}
		ts.tenants = append(ts.tenants, byToken[sum][0].tenant)
		ts.sums = append(ts.sums, sum)
	}
	return ts, broken, nil
}

// tokenLine parses one line ("" tenant: a blank line or a comment).
func tokenLine(line string) (tenant, token string, err error) {
	if line == "" || strings.HasPrefix(line, "#") {
		return "", "", nil
	}
	f := strings.Fields(line)
	switch {
	case len(f) != 2:
		return "", "", errors.New(`want "TENANT TOKEN"`)
	case !app.TenantName.MatchString(f[0]):
		return "", "", fmt.Errorf("tenant %q: use 1-63 of a-z, 0-9, _ and -, starting with a letter or digit", f[0])
	case len(f[1]) < 16:
		return "", "", fmt.Errorf("the token is %d characters; use at least 16 (say, openssl rand -hex 32)", len(f[1]))
	}
	return f[0], f[1], nil
}

// reloadOnHUP reads the tokens file again on SIGHUP. Its valid lines take
// effect, so a revoked token stops working even when another line is
// broken; each broken line is refused and named in the log. Tenants no
// longer in the file are removed: their MCP sessions end and their
// containers go. A file that cannot be read keeps the tokens in force.
func (t *tenants) reloadOnHUP(path string) func() {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-hup:
				t.reload(path)
			}
		}
	})
	return func() { signal.Stop(hup); close(done); wg.Wait() }
}

// reload applies the tokens file at path.
func (t *tenants) reload(path string) {
	toks, broken, err := parseTokens(path)
	if err != nil {
		t.log.Error("tokens file not reloaded: it cannot be read; the tokens in force stay", "err", err)
		return
	}
	for _, err := range broken {
		t.log.Error("tokens file: a broken line is refused (its token does not work); the file's other lines apply", "err", err)
	}
	t.tokens.Store(toks)
	if len(toks.sums) == 0 {
		t.log.Error("tokens file reloaded with no valid token: every request is refused", "file", path)
	} else {
		t.log.Info("tokens file reloaded", "tenants", toks.describe(), "broken_lines", len(broken))
	}
	t.removeGone(toks)
}

// removeGone ends the tenants that toks no longer names: their MCP
// sessions, sandbox sessions, runs and containers.
func (t *tenants) removeGone(toks *tokenSet) {
	t.mu.Lock()
	var gone []*tenantServer
	for name, ts := range t.byName {
		if name != "" && !slices.Contains(toks.tenants, name) {
			gone = append(gone, ts)
			delete(t.byName, name)
		}
	}
	t.mu.Unlock()
	for _, ts := range gone {
		for s := range ts.sessions.srv.Sessions() {
			s.Close()
		}
		ts.app.Shutdown()
		ts.stop()
		ts.app.CloseTenant()
		t.log.Info("tenant removed: its token is no longer in the tokens file; its sessions and containers are gone", "tenant", ts.app.Tenant())
	}
}

func (ts *tokenSet) describe() string {
	if ts == nil {
		return "one, no tokens"
	}
	names := slices.Clone(ts.tenants)
	slices.Sort(names)
	return strings.Join(slices.Compact(names), ",")
}
