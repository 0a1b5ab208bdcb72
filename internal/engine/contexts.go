package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// maxConfigBytes bounds what is read of a docker CLI config or context file.
const maxConfigBytes = 1 << 20

// currentContext is the docker CLI's current context in cfgDir's
// config.json ("" when it names none); note says why it could not be read.
func currentContext(cfgDir string) (name, note string) {
	var cfg struct {
		CurrentContext string `json:"currentContext"`
	}
	err := readJSON(filepath.Join(cfgDir, "config.json"), &cfg)
	if errors.Is(err, fs.ErrNotExist) {
		return "", ""
	}
	if err != nil {
		return "", err.Error()
	}
	return cfg.CurrentContext, ""
}

// contextCandidate reads the docker CLI context name from cfgDir, as the
// CLI stores it: contexts/meta/<sha256 of name>/meta.json, with its TLS
// files, if any, under contexts/tls/<same>/docker. "default" is no file:
// the candidate is empty.
func contextCandidate(cfgDir, name, source string) Candidate {
	c := Candidate{Source: source}
	if name == "default" {
		return c
	}
	sum := sha256.Sum256([]byte(name))
	id := hex.EncodeToString(sum[:])
	var meta struct {
		Endpoints map[string]struct {
			Host          string
			SkipTLSVerify bool
		}
	}
	if err := readJSON(filepath.Join(cfgDir, "contexts", "meta", id, "meta.json"), &meta); err != nil {
		c.Note = fmt.Sprintf("context %q: %v (see `docker context ls`)", name, err)
		return c
	}
	c.Host = meta.Endpoints["docker"].Host
	if c.Host == "" {
		c.Note = fmt.Sprintf("context %q names no docker endpoint", name)
	}
	tls := filepath.Join(cfgDir, "contexts", "tls", id, "docker")
	if _, err := os.Stat(filepath.Join(tls, "cert.pem")); err == nil && !meta.Endpoints["docker"].SkipTLSVerify {
		c.TLS = &TLSFiles{CA: filepath.Join(tls, "ca.pem"), Cert: filepath.Join(tls, "cert.pem"), Key: filepath.Join(tls, "key.pem")}
	}
	return c
}

// readJSON decodes the file at path (at most maxConfigBytes) into v.
func readJSON(path string, v any) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > maxConfigBytes {
		return fmt.Errorf("%s is over %d bytes", path, maxConfigBytes)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
