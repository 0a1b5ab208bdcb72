package engine

import (
	"cmp"
	"os"
	"path/filepath"
	"strings"
)

// Env is what discovery reads from the host. Its zero value reads this
// process's environment and home folder.
type Env struct {
	Getenv func(string) string // nil: os.Getenv
	Home   string              // "": os.UserHomeDir
	// Default is the platform's default engine, tried last; "" is
	// unix:///var/run/docker.sock (npipe:////./pipe/docker_engine on Windows).
	Default string
}

func (e Env) get(name string) string {
	if e.Getenv == nil {
		return os.Getenv(name)
	}
	return e.Getenv(name)
}

func (e Env) home() string {
	if e.Home != "" {
		return e.Home
	}
	h, _ := os.UserHomeDir() // no home: the places under it are simply not there
	return h
}

// Candidate is one place the engine may answer.
type Candidate struct {
	Host   string // a DOCKER_HOST value: unix:///..., npipe:////./pipe/..., tcp://...
	Source string // where it came from, for people: "DOCKER_HOST", "Docker Desktop", ...
	TLS    *TLSFiles
	// Explicit: the user named it (DOCKER_HOST, DOCKER_CONTEXT): it is used
	// whether it answers or not, as the docker CLI does; nothing after it
	// is tried.
	Explicit bool
	// FromEnv: the client takes DOCKER_HOST's companions (DOCKER_TLS_VERIFY,
	// DOCKER_CERT_PATH, DOCKER_API_VERSION) from the environment.
	FromEnv bool
	// Note: why it was not usable before it was tried (a context that names
	// no engine, a config that cannot be read); such a candidate has no Host.
	Note string
}

// TLSFiles are a docker CLI context's client certificates.
type TLSFiles struct{ CA, Cert, Key string }

// Candidates lists, in order, where the engine is looked for: DOCKER_HOST,
// DOCKER_CONTEXT, the docker CLI's current context (its config folder is
// DOCKER_CONFIG or ~/.docker), the desktop engines' sockets, then the
// platform's default. An explicit candidate ends the list.
func Candidates(env Env) []Candidate {
	if h := env.get("DOCKER_HOST"); h != "" {
		return []Candidate{{Host: h, Source: "DOCKER_HOST", Explicit: true, FromEnv: true}}
	}
	cfgDir := cmp.Or(env.get("DOCKER_CONFIG"), filepath.Join(env.home(), ".docker"))
	if name := env.get("DOCKER_CONTEXT"); name != "" {
		c := contextCandidate(cfgDir, name, "DOCKER_CONTEXT="+name)
		if c.Host != "" || c.Note != "" {
			c.Explicit = true
			return []Candidate{c}
		}
		// "default": the default engine, as the docker CLI does.
	} else if name, note := currentContext(cfgDir); note != "" {
		out := []Candidate{{Source: "the docker CLI's config " + filepath.Join(cfgDir, "config.json"), Note: note}}
		return append(out, desktopCandidates(env)...)
	} else if name != "" && name != "default" {
		c := contextCandidate(cfgDir, name, "the docker CLI's current context "+name+" ("+filepath.Join(cfgDir, "config.json")+")")
		return append([]Candidate{c}, desktopCandidates(env)...)
	}
	return desktopCandidates(env)
}

// desktopCandidates are the desktop engines' sockets, then the default.
func desktopCandidates(env Env) []Candidate {
	return append(desktopSockets(env), Candidate{Host: cmp.Or(env.Default, defaultHost), Source: "the platform's default"})
}

// sock is a candidate for the unix socket at path.
func sock(source, path string) Candidate {
	return Candidate{Host: "unix://" + filepath.ToSlash(path), Source: source}
}

// socketPath is the file a unix:// host names, or "" for any other host.
func socketPath(host string) string {
	p, ok := strings.CutPrefix(host, "unix://")
	if !ok {
		return ""
	}
	return filepath.FromSlash(p)
}
