package images

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// listPackages prints the environment's distributions ({normalized name:
// version}), the import names they provide ({module: [distribution]}) and
// the standard library's module names, as JSON.
const listPackages = `import json, re, sys; from importlib import metadata
d = {re.sub(r"[-_.]+", "-", x.metadata["Name"]).lower(): x.version for x in metadata.distributions() if x.metadata["Name"]}
try: m = metadata.packages_distributions()
except AttributeError: m = {}
print(json.dumps({"dists": d, "modules": m, "stdlib": sorted(getattr(sys, "stdlib_module_names", ())),
    "python": "%d.%d.%d" % sys.version_info[:3]}))`

// listing is what listPackages prints.
type listing struct {
	Dists   map[string]string   `json:"dists"`
	Modules map[string][]string `json:"modules"`
	Stdlib  []string            `json:"stdlib"`
	Python  string              `json:"python"`
}

// PackageStatus is one answer of Installed. A name is looked up as a
// distribution (pip's name), then as an import name (import PIL: Pillow),
// then in the standard library (json); Matched says which.
type PackageStatus struct {
	Name      string `json:"name"`
	Installed bool   `json:"installed"`
	Version   string `json:"version,omitempty"`
	Matched   string `json:"matched,omitempty" jsonschema:"distribution, import name (of the distribution named) or standard library"`
}

// packageCache holds the installed distributions of each image and
// interpreter (one image can hold several Pythons); an image ID names
// immutable content, so entries never go stale.
type packageCache struct {
	mu sync.Mutex
	m  map[string]listing
}

func (c *packageCache) get(id string) (listing, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[id]
	return v, ok
}

func (c *packageCache) put(id string, pkgs listing) {
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
		out[i] = pkgs.status(n, keys[i])
	}
	return out, nil
}

// status answers for name (key: its normalized form).
func (l listing) status(name, key string) PackageStatus {
	if v, ok := l.Dists[key]; ok {
		return PackageStatus{Name: name, Installed: true, Version: v, Matched: "distribution"}
	}
	if dists := l.Modules[name]; len(dists) > 0 {
		dkey := normalizeName(dists[0])
		return PackageStatus{Name: name, Installed: true, Version: l.Dists[dkey], Matched: "import name of " + dists[0]}
	}
	if slices.Contains(l.Stdlib, name) {
		return PackageStatus{Name: name, Installed: true, Version: l.Python, Matched: "standard library"}
	}
	return PackageStatus{Name: name}
}

// packages lists env's distributions, from the cache when possible.
func (m *Manager) packages(ctx context.Context, env Environment) (listing, error) {
	key := env.ImageID + "\x00" + strings.Join(env.Python(), "\x00")
	if pkgs, ok := m.pkgs.get(key); ok {
		return pkgs, nil
	}
	stdout, err := m.cfg.Prober.Probe(ctx, env.Ref(), env.Python(), listPackages)
	if err != nil {
		return listing{}, fmt.Errorf("list installed packages: %w", err)
	}
	var pkgs listing
	if err := json.Unmarshal([]byte(stdout), &pkgs); err != nil {
		return listing{}, fmt.Errorf("list installed packages: unexpected output %.200q", stdout)
	}
	m.pkgs.put(key, pkgs)
	return pkgs, nil
}
