// Package serve serves pybox's MCP tools over a transport: stdio for one
// client (Stdio: a guard that answers malformed lines, and a client that
// stops reading is taken as gone), or streamable HTTP for many tenants
// (HTTP: bearer tokens reloaded on SIGHUP, each tenant an app.App of its
// own made on its first request, calls-per-minute and MCP-session quotas,
// connection bounds, Prometheus metrics, an access log, /healthz, and a
// drain of the calls in flight when it stops).
//
// What the HTTP layer needs of a tenant's app is the Tenant interface, so
// its tests run on fakes, without Docker.
package serve
