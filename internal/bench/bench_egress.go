package bench

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/tools"
)

// egressBenchProgram makes N HTTPS requests (a new connection each) to
// URL, then downloads URL/big once, and prints the times as JSON. TLS is
// not verified: the server is the bench's own, and the figure is latency.
const egressBenchProgram = `import json, ssl, sys, time, urllib.request
url, n = sys.argv[1], int(sys.argv[2])
ctx = ssl._create_unverified_context()
opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=ctx))
ms = []
for _ in range(n):
    t = time.perf_counter(); opener.open(url + "/small", timeout=30).read(); ms.append((time.perf_counter() - t) * 1000)
t = time.perf_counter(); r = opener.open(url + "/big", timeout=300); got = 0
while True:
    b = r.read(1 << 20)
    if not b: break
    got += len(b)
print(json.dumps({"ms": ms, "big_s": time.perf_counter() - t, "big_bytes": got}))
`

// egressRows measures one HTTPS request through pybox's egress proxy (from
// a program, by name) against the same program run on the host with no
// proxy (host python3), and the throughput of a 100 MiB download through it.
func (b *bench) egressRows(ctx context.Context, serveArgs []string) ([]Row, error) {
	big := make([]byte, 100<<20)
	rand.Read(big)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Write(big)
			return
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	port := srv.URL[strings.LastIndexByte(srv.URL, ':')+1:]
	direct, err := exec.CommandContext(ctx, "python3", "-c", egressBenchProgram, srv.URL, fmt.Sprint(b.n)).Output()
	if err != nil {
		return nil, fmt.Errorf("bench: the direct baseline needs python3 on the host: %w", err)
	}
	cs, stop, err := b.connect(ctx, serveArgs, "PYBOX_EGRESS_ALLOW=bench.test:"+port, "PYBOX_EGRESS_ALLOW_ADDRS=127.0.0.1",
		"PYBOX_EGRESS_TEST_HOSTS=bench.test=127.0.0.1")
	if err != nil {
		return nil, err
	}
	defer stop()
	code := fmt.Sprintf("import sys; sys.argv[1:] = [%q, %q]\n", "https://bench.test:"+port, fmt.Sprint(b.n)) + egressBenchProgram
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_code", Arguments: map[string]any{"code": code, "timeout_s": 600}})
	if err != nil {
		return nil, err
	}
	var out tools.ExecutionOutput
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &out); err != nil || out.ExitCode != 0 {
		return nil, fmt.Errorf("bench: the program through the proxy failed: %s", Text(res))
	}
	return append(egressTimes("HTTPS request from the host, direct (python3, new connection)", direct),
		egressTimes("HTTPS request from a program through the egress proxy (new connection)", []byte(out.Stdout))...), nil
}

// egressTimes turns the program's JSON into a latency row and a
// throughput row.
func egressTimes(name string, js []byte) []Row {
	var t struct {
		MS       []float64 `json:"ms"`
		BigS     float64   `json:"big_s"`
		BigBytes int64     `json:"big_bytes"`
	}
	if err := json.Unmarshal(js, &t); err != nil || len(t.MS) == 0 {
		return []Row{{Name: name, Skipped: fmt.Sprintf("unreadable timings %.200q", js)}}
	}
	ds := make([]time.Duration, len(t.MS))
	for i, m := range t.MS {
		ds[i] = time.Duration(m * float64(time.Millisecond))
	}
	mibs := float64(t.BigBytes) / (1 << 20) / t.BigS
	return []Row{summarise(name, ds), {Name: strings.Replace(name, "HTTPS request", "100 MiB download", 1), N: 1,
		P50MS: t.BigS * 1000, MinMS: t.BigS * 1000, Note: fmt.Sprintf("%.0f MiB/s", mibs)}}
}
