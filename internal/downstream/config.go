// Package downstream connects pybox to other MCP servers whose tools
// sandboxed code may call (code mode): their configuration, one MCP
// client per server (the Go SDK's, started lazily, restarted after the
// server ended or stopped answering, stopped with pybox; each call sent
// at most once, each message read with a bound, errors that name the
// server and never its URL, headers or environment; command servers
// started with a minimal environment), and the Python stubs that show a
// model how to call them.
package downstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
)

// Server is one downstream MCP server: a command to start (stdio) or a
// streamable HTTP URL.
type Server struct {
	Name        string
	Command     string
	Args        []string
	Env         map[string]string
	URL         string
	Headers     map[string]string
	Description string
}

// entry is a server as written in either accepted file format.
type entry struct {
	Command     string            `json:"command"`
	Args        []string          `json:"args"`
	Env         map[string]string `json:"env"`
	URL         string            `json:"url"`
	Headers     map[string]string `json:"headers"`
	Description string            `json:"description"`
	Type        string            `json:"type"` // Claude Desktop's "stdio" or "http"/"streamable-http", optional
}

// serverName is a server's name as the sandbox sees it: tools.NAME.
var serverName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// Load reads a servers file: MCP Code Mode's {"servers": {NAME: {command,
// args, env?, description?}}} or Claude Desktop's {"mcpServers": {...}},
// with "url" (and "headers") for streamable HTTP servers. Every mistake
// is reported, naming its field.
func Load(path string) ([]Server, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("MCP servers file: %w", err)
	}
	var f struct {
		Servers    map[string]json.RawMessage `json:"servers"`
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("MCP servers file %s: not JSON: %w", path, err)
	}
	key, raw := "servers", f.Servers
	switch {
	case f.Servers != nil && f.MCPServers != nil:
		return nil, fmt.Errorf("MCP servers file %s: give servers or mcpServers, not both", path)
	case f.MCPServers != nil:
		key, raw = "mcpServers", f.MCPServers
	case f.Servers == nil:
		return nil, fmt.Errorf("MCP servers file %s: no servers (want {\"servers\": {NAME: {\"command\": ...}}} or {\"mcpServers\": {...}})", path)
	}
	var out []Server
	var errs []error
	for name, msg := range raw {
		field := key + "." + name
		var e entry
		dec := json.NewDecoder(bytes.NewReader(msg))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			errs = append(errs, fmt.Errorf("%s: %v", field, err))
			continue
		}
		s, err := e.server(name, field)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, s)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("MCP servers file %s: %w", path, err)
	}
	slices.SortFunc(out, func(a, b Server) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (e entry) server(name, field string) (Server, error) {
	s := Server{Name: name, Command: e.Command, Args: e.Args, Env: e.Env, URL: e.URL, Headers: e.Headers, Description: e.Description}
	var errs []error
	if !serverName.MatchString(name) {
		errs = append(errs, fmt.Errorf("%s: the name must be a Python identifier (letters, digits, _): code calls tools.%s.TOOL", field, name))
	}
	switch {
	case e.Command == "" && e.URL == "":
		errs = append(errs, fmt.Errorf("%s: give command (a server started over stdio) or url (streamable HTTP)", field))
	case e.Command != "" && e.URL != "":
		errs = append(errs, fmt.Errorf("%s: give command or url, not both", field))
	case e.URL != "":
		if u, err := url.Parse(e.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("%s.url: %q is not an http(s) URL", field, e.URL))
		}
		if len(e.Args) > 0 || len(e.Env) > 0 {
			errs = append(errs, fmt.Errorf("%s: args and env are for command servers, not url ones", field))
		}
	default:
		if len(e.Headers) > 0 {
			errs = append(errs, fmt.Errorf("%s.headers: headers are for url servers", field))
		}
	}
	switch e.Type {
	case "", "stdio", "http", "streamable-http", "streamableHttp":
	default:
		errs = append(errs, fmt.Errorf("%s.type: %q: use stdio or http (or leave it out)", field, e.Type))
	}
	return s, errors.Join(errs...)
}
