package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeEnv is an environment of vars with home as the home folder.
func fakeEnv(home string, vars map[string]string) Env {
	return Env{Home: home, Getenv: func(k string) string { return vars[k] }}
}

// writeContext stores a docker CLI context named name, pointing at host,
// in cfgDir as the CLI does.
func writeContext(t *testing.T, cfgDir, name, host string) {
	t.Helper()
	sum := sha256.Sum256([]byte(name))
	dir := filepath.Join(cfgDir, "contexts", "meta", hex.EncodeToString(sum[:]))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	meta := `{"Name":"` + name + `","Metadata":{},"Endpoints":{"docker":{"Host":"` + host + `","SkipTLSVerify":false}}}`
	if err := os.WriteFile(filepath.Join(dir, "meta.json"), []byte(meta), 0o600); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// fakeEngine answers the Docker API's ping on a loopback TCP port.
func fakeEngine(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/_ping") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Api-Version", "1.41")
		w.Write([]byte("OK"))
	}))
	t.Cleanup(srv.Close)
	return "tcp://" + strings.TrimPrefix(srv.URL, "http://")
}

// deadHost is a loopback address nothing listens on.
func deadHost(t *testing.T) string {
	srv := httptest.NewServer(http.NotFoundHandler())
	host := "tcp://" + strings.TrimPrefix(srv.URL, "http://")
	srv.Close()
	return host
}

func sources(cs []Candidate) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Source)
	}
	return out
}

func TestCandidatesOrder(t *testing.T) {
	home := t.TempDir()
	cfg := filepath.Join(home, "cfg")
	writeContext(t, cfg, "colima", "unix:///ctx/colima.sock")
	writeContext(t, filepath.Join(home, ".docker"), "orb", "unix:///ctx/orb.sock")
	writeFile(t, filepath.Join(cfg, "config.json"), `{"currentContext":"colima"}`)
	writeFile(t, filepath.Join(home, ".docker", "config.json"), `{"currentContext":"orb"}`)

	t.Run("DOCKER_HOST wins over DOCKER_CONTEXT and is alone", func(t *testing.T) {
		cs := Candidates(fakeEnv(home, map[string]string{"DOCKER_HOST": "tcp://h:2375", "DOCKER_CONTEXT": "orb"}))
		if len(cs) != 1 || cs[0].Host != "tcp://h:2375" || !cs[0].Explicit {
			t.Fatalf("got %+v, want DOCKER_HOST alone", cs)
		}
	})
	t.Run("DOCKER_CONTEXT is explicit", func(t *testing.T) {
		cs := Candidates(fakeEnv(home, map[string]string{"DOCKER_CONTEXT": "orb"}))
		if len(cs) != 1 || cs[0].Host != "unix:///ctx/orb.sock" || !cs[0].Explicit {
			t.Fatalf("got %+v, want context orb alone", cs)
		}
	})
	t.Run("a missing DOCKER_CONTEXT says so", func(t *testing.T) {
		cs := Candidates(fakeEnv(home, map[string]string{"DOCKER_CONTEXT": "nope"}))
		if len(cs) != 1 || cs[0].Host != "" || !strings.Contains(cs[0].Note, `context "nope"`) {
			t.Fatalf("got %+v, want a note on context nope", cs)
		}
	})
	t.Run("DOCKER_CONFIG's current context, then the usual places", func(t *testing.T) {
		cs := Candidates(fakeEnv(home, map[string]string{"DOCKER_CONFIG": cfg}))
		if cs[0].Host != "unix:///ctx/colima.sock" || cs[0].Explicit {
			t.Fatalf("first = %+v, want context colima, not explicit", cs[0])
		}
		if last := cs[len(cs)-1]; last.Host != defaultHost {
			t.Errorf("last = %+v, want the default %s", last, defaultHost)
		}
	})
	t.Run("home's current context", func(t *testing.T) {
		cs := Candidates(fakeEnv(home, nil))
		if cs[0].Host != "unix:///ctx/orb.sock" {
			t.Fatalf("first = %+v, want context orb", cs[0])
		}
	})
	t.Run("DOCKER_CONTEXT=default: the usual places", func(t *testing.T) {
		cs := Candidates(fakeEnv(home, map[string]string{"DOCKER_CONTEXT": "default"}))
		if got, want := sources(cs), sources(desktopCandidates(fakeEnv(home, nil))); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
}

func TestDiscoverFirstThatAnswers(t *testing.T) {
	home := t.TempDir()
	writeContext(t, filepath.Join(home, ".docker"), "dead", deadHost(t))
	writeFile(t, filepath.Join(home, ".docker", "config.json"), `{"currentContext":"dead"}`)
	live := fakeEngine(t)
	writeContext(t, filepath.Join(home, ".docker"), "live", live)

	ch := Discover(context.Background(), fakeEnv(home, map[string]string{"DOCKER_CONTEXT": "live"}))
	if !ch.Found || ch.Host != live {
		t.Fatalf("DOCKER_CONTEXT=live: got %+v, want %s found", ch, live)
	}
	if !strings.Contains(ch.Why(), "DOCKER_CONTEXT=live") {
		t.Errorf("Why() = %q, want it to name DOCKER_CONTEXT=live", ch.Why())
	}
	ch = Discover(context.Background(), fakeEnv(home, map[string]string{"DOCKER_HOST": deadHost(t)}))
	if ch.Found || len(ch.Tried) != 1 {
		t.Fatalf("a dead DOCKER_HOST: got %+v, want it chosen, not found, alone", ch)
	}
	if r := ch.Report(nil); !strings.Contains(r, "named by DOCKER_HOST") || !strings.Contains(r, "unset DOCKER_HOST") {
		t.Errorf("report = %q, want it to name DOCKER_HOST and how to look elsewhere", r)
	}
}

func TestDiscoverNoneAnswers(t *testing.T) {
	home := t.TempDir()
	writeContext(t, filepath.Join(home, ".docker"), "dead", deadHost(t))
	writeFile(t, filepath.Join(home, ".docker", "config.json"), `{"currentContext":"dead"}`)
	env := fakeEnv(home, nil)
	env.Default = deadHost(t)
	ch := Discover(context.Background(), env)
	if ch.Found || ch.Host != env.Default {
		t.Fatalf("got %+v, want the default %s, not found", ch, env.Default)
	}
	report := ch.Report(nil)
	for _, want := range []string{"DOCKER_HOST: not set", "current context dead", "Docker Desktop", "Colima", "OrbStack",
		"Rancher Desktop", "Podman machine", env.Default, "set DOCKER_HOST"} {
		if !strings.Contains(report, want) {
			t.Errorf("the report lacks %q:\n%s", want, report)
		}
	}
}
