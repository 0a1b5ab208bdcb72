// Command daemonjson registers gVisor's runsc as a runtime in a Docker
// daemon.json, keeping everything else in it (.ci/run calls it; the daemon
// reloads runtimes on SIGHUP).
//
//	go run ./.ci/daemonjson /etc/docker/daemon.json /usr/local/bin/runsc
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: daemonjson DAEMON_JSON RUNSC_PATH")
		os.Exit(2)
	}
	if err := register(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "daemonjson:", err)
		os.Exit(1)
	}
}

func register(path, runsc string) error {
	cfg := map[string]any{}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	case len(data) > 0:
		if err := json.Unmarshal(data, &cfg); err != nil {
			return fmt.Errorf("%s is not a JSON object: %w", path, err)
		}
	}
	runtimes, _ := cfg["runtimes"].(map[string]any)
	if runtimes == nil {
		runtimes = map[string]any{}
	}
	// The sidecar flag keeps the embedded sentry of the pinned version;
	// --network=none gives sandboxes only loopback even if a caller forgot
	// network none; --host-uds=open lets them connect to a host unix socket
	// mounted into them, and only that (no bind or create): the egress
	// proxy's, the only way out of a run with an allowlist (see the
	// docs/security.md and docs/packages.md).
	runtimes["runsc"] = map[string]any{
		"path":        runsc,
		"runtimeArgs": []string{"--sidecar-usage-policy=LEGACY_DEPRECATED_SLOW_EMBEDDED_FALLBACK", "--network=none", "--host-uds=open"},
	}
	cfg["runtimes"] = runtimes
	out, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".pybox-tmp"
	if err := os.WriteFile(tmp, append(out, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
