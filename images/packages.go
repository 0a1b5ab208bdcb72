package images

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
)

// listPackages prints {normalized name: version} for every distribution
// the interpreter can import. It is one line because `conda run` mangles
// newlines in arguments.
const listPackages = `import json, re; from importlib import metadata; ` +
	`print(json.dumps({re.sub(r"[-_.]+", "-", d.metadata["Name"]).lower(): d.version ` +
	`for d in metadata.distributions() if d.metadata["Name"]}))`

// PackageStatus is one answer of Installed.
type PackageStatus struct {
	Name      string `json:"name"`
	Installed bool   `json:"installed"`
	Version   string `json:"version,omitempty"`
}

// packageCache holds the installed distributions of each image and
// interpreter (one image can hold several Pythons); an image ID names
// immutable content, so entries never go stale.
type packageCache struct {
	mu sync.Mutex
	m  map[string]map[string]string
}

func (c *packageCache) get(id string) (map[string]string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[id]
	return v, ok
}

func (c *packageCache) put(id string, pkgs map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[id] = pkgs
}

// PackageKeys validates package names (each a requirement without URL) and
// returns their normalized names; errors wrap ErrBadRequirement.
func PackageKeys(names []string) ([]string, error) {
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: give at least one package name", ErrBadRequirement)
	}
	keys := make([]string, len(names))
	for i, n := range names {
		r, err := ParseRequirement(n, RequirementPolicy{})
		if err != nil {
			return nil, err
		}
		keys[i] = r.Key
	}
	return keys, nil
}

// Installed reports, for each name, whether the active environment has it
// and which version. The listing is taken once per image ID.
func (m *Manager) Installed(ctx context.Context, names []string) ([]PackageStatus, error) {
	keys, err := PackageKeys(names)
	if err != nil {
		return nil, err
	}
	pkgs, err := m.packages(ctx, m.Active())
	if err != nil {
		return nil, err
	}
	out := make([]PackageStatus, len(names))
	for i, n := range names {
		v, ok := pkgs[keys[i]]
		out[i] = PackageStatus{Name: n, Installed: ok, Version: v}
	}
	return out, nil
}

// packages lists env's distributions, from the cache when possible.
func (m *Manager) packages(ctx context.Context, env Environment) (map[string]string, error) {
	key := env.ImageID + "\x00" + strings.Join(env.Python(), "\x00")
	if pkgs, ok := m.pkgs.get(key); ok {
		return pkgs, nil
	}
	stdout, err := m.cfg.Prober.Probe(ctx, env.Ref(), env.Python(), listPackages)
	if err != nil {
		return nil, fmt.Errorf("list installed packages: %w", err)
	}
	pkgs := map[string]string{}
	if err := json.Unmarshal([]byte(stdout), &pkgs); err != nil {
		return nil, fmt.Errorf("list installed packages: unexpected output %q", stdout)
	}
	m.pkgs.put(key, pkgs)
	return pkgs, nil
}
