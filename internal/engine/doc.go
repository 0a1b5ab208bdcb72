// Package engine is the one place that calls the Docker Engine API.
//
// The sandbox and images packages describe containers with the Docker API
// types (container.Config, container.HostConfig) but every call to the daemon
// goes through a *Client here, so a later switch from the frozen
// github.com/docker/docker module to github.com/moby/moby/client touches this
// package only.
//
// A Client is safe for concurrent use. Run owns a container's whole life:
// create, attach, wait(next-exit), start, feed stdin, capped copy, exit or
// deadline kill, OOM check, and removal on a detached, time-limited context.
package engine
