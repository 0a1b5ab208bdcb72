package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/docker/docker/client"
)

// probeTimeout bounds one candidate's ping; a socket nobody listens on
// fails at once, so only an engine that hangs costs this much.
const probeTimeout = 3 * time.Second

// Attempt is one candidate and what trying it gave.
type Attempt struct {
	Candidate
	Result string // "answered", "no such socket", the connection error, ...
	OK     bool
}

// Choice is where discovery settled and every place it looked.
type Choice struct {
	Host   string // the engine used: the first that answered, else the explicit or default one
	Source string
	Found  bool // Host answered when discovery ran
	Tried  []Attempt
	chosen Candidate
}

// Discover tries the candidates of env in order and settles on the first
// that answers. An explicit candidate (DOCKER_HOST, DOCKER_CONTEXT) is
// chosen whether it answers or not. When none answers the choice is the
// platform's default, not Found.
func Discover(ctx context.Context, env Env) Choice {
	var ch Choice
	list := Candidates(env)
	if !list[0].Explicit {
		ch.Tried = unset(env, list[0])
	}
	for _, c := range list {
		a := probe(ctx, c)
		ch.Tried = append(ch.Tried, a)
		if a.OK || (c.Explicit && c.Host != "") {
			ch.settle(c, a.OK)
			return ch
		}
		if c.Explicit {
			break
		}
	}
	ch.settle(Candidate{Host: cmp.Or(env.Default, defaultHost), Source: "the platform's default"}, false)
	return ch
}

// unset are the lines saying which settings name no engine, before the
// places tried.
func unset(env Env, first Candidate) []Attempt {
	ctx := "not set"
	if env.get("DOCKER_CONTEXT") != "" {
		ctx = "default (the usual places below)"
	}
	out := []Attempt{{Candidate: Candidate{Source: "DOCKER_HOST"}, Result: "not set"},
		{Candidate: Candidate{Source: "DOCKER_CONTEXT"}, Result: ctx}}
	if !strings.HasPrefix(first.Source, "the docker CLI") {
		out = append(out, Attempt{Candidate: Candidate{Source: "the docker CLI's current context"}, Result: "default (none set)"})
	}
	return out
}

func (ch *Choice) settle(c Candidate, ok bool) {
	ch.chosen, ch.Host, ch.Source, ch.Found = c, c.Host, c.Source, ok
}

// probe pings candidate c: a unix socket that is not there is not dialled.
func probe(ctx context.Context, c Candidate) Attempt {
	a := Attempt{Candidate: c}
	if c.Host == "" {
		a.Result = c.Note
		return a
	}
	if p := socketPath(c.Host); p != "" {
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			a.Result = "no such socket"
			return a
		}
	}
	api, err := newAPI(c)
	if err != nil {
		a.Result = err.Error()
		return a
	}
	defer api.Close()
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if _, err := api.Ping(ctx); err != nil {
		a.Result = pingError(err)
		return a
	}
	a.Result, a.OK = "answered", true
	return a
}

// pingError is the short reason a ping failed.
func pingError(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 && client.IsErrConnectionFailed(err) {
		return s[i+2:] // "connection refused", "permission denied", ...
	}
	return s
}

// newAPI is a Docker API client for candidate c.
func newAPI(c Candidate) (*client.Client, error) {
	opts := []client.Opt{client.WithVersionFromEnv(), client.WithAPIVersionNegotiation()}
	if c.FromEnv {
		opts = append(opts, client.FromEnv)
	}
	opts = append(opts, client.WithHost(c.Host))
	if c.TLS != nil {
		opts = append(opts, client.WithTLSClientConfig(c.TLS.CA, c.TLS.Cert, c.TLS.Key))
	}
	api, err := client.NewClientWithOpts(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker client for %s: %w", c.Host, err)
	}
	return api, nil
}
