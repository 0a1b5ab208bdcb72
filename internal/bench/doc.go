// Package bench is `pybox bench`: it measures pybox through real MCP
// clients of pybox processes it starts from this executable (stdio and
// streamable HTTP; warm, cold and session latency, bursts, concurrent
// clients, installs, figures, runtimes side by side, Kubernetes beside
// Docker, the egress proxy, code mode, `pybox eval` throughput and its
// floor) and writes a table, or a JSON report. Run is its entry point;
// it needs an app.App for the engine and runtime image.
package bench
