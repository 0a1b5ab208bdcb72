//go:build !windows

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// tsClient is a client written with the official MCP TypeScript SDK: it
// connects over streamable HTTP with a bearer token, lists the tools,
// calls execute_code with a list-free and a list argument, and prints
// what it got as JSON.
const tsClient = `
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
const [url, token] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: token ? { headers: { Authorization: "Bearer " + token } } : {},
});
const client = new Client({ name: "pybox-ts-e2e", version: "1.0.0" });
const out = {};
try {
  await client.connect(transport);
  out.tools = (await client.listTools()).tools.map((t) => t.name);
  const run = await client.callTool({ name: "execute_code", arguments: { code: "import sys\nprint(sum(range(10)), sys.argv[1:])" } });
  out.run = { isError: run.isError ?? false, structured: run.structuredContent };
  const check = await client.callTool({ name: "check_installed_packages", arguments: { packages: ["json", "nosuchpkg"] } });
  out.check = { isError: check.isError ?? false, structured: check.structuredContent };
} catch (e) {
  out.error = String(e);
}
console.log(JSON.stringify(out));
await client.close().catch(() => {});
`

// TestHTTPTypeScriptClient: the official TypeScript SDK's streamable HTTP
// client works against pybox serve --http with a bearer token, and is
// refused without one.
func TestHTTPTypeScriptClient(t *testing.T) {
	parallelTest(t)
	modules := ciTool(t, "PYBOX_NPM_MODULES", "node_modules holding the MCP TypeScript SDK")
	h := startHTTP(t, false)
	dir := t.TempDir()
	os.Symlink(modules, filepath.Join(dir, "node_modules"))
	script := filepath.Join(dir, "client.mjs")
	os.WriteFile(script, []byte(tsClient), 0o644)
	run := func(token string) map[string]any {
		t.Helper()
		out, err := exec.Command("node", script, h.url+"/mcp", token).Output()
		if err != nil {
			t.Fatalf("node client: %v\n%s", err, out)
		}
		var got map[string]any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("node client printed %q: %v", out, err)
		}
		return got
	}
	got := run(tokenA)
	b, _ := json.Marshal(got)
	s := string(b)
	if got["error"] != nil || !strings.Contains(s, `"execute_code"`) || !strings.Contains(s, `"stdout":"45 []\n"`) ||
		!strings.Contains(s, `"exit_code":0`) || !strings.Contains(s, `"nosuchpkg"`) {
		t.Errorf("the TypeScript client: %s", s)
	}
	if refused := run("token-of-nobody-000000000000"); refused["error"] == nil || !strings.Contains(refused["error"].(string), "unauthorized") {
		t.Errorf("the TypeScript client with a wrong token: %v", refused)
	}
}

// ciTool is the value of env, which names a tool .ci/run installs: in CI
// it must be set; elsewhere its absence skips the test.
func ciTool(t *testing.T, env, what string) string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set: .ci/run installs %s and sets it", env, what)
		}
		t.Skipf("%s is not set (%s; .ci/run installs it)", env, what)
	}
	return v
}
