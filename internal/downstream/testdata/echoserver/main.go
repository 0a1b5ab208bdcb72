// Command echoserver is a small MCP server for downstream tests, over
// stdio (or streamable HTTP with -http ADDR: it prints its URL first):
// echo, add, fail, crash (the process exits), hang (never answers), and
// for the bounds: big (a result of size bytes), slow (echo after ms),
// once (appends a line to a file, then exits: a call that must not run
// twice), freeze (the process stops: nothing is answered any more) and
// env (its environment).
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type echoIn struct {
	Text  string `json:"text" jsonschema:"what to echo"`
	Times int    `json:"times,omitempty" jsonschema:"how many times"`
}

type addIn struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

type none struct{}

type bigIn struct {
	Size int `json:"size"`
}

type slowIn struct {
	MS   int    `json:"ms"`
	Text string `json:"text"`
}

type onceIn struct {
	Path string `json:"path"`
}

func main() {
	httpAddr := flag.String("http", "", "serve streamable HTTP on this address instead of stdio")
	flag.Parse()
	s := mcp.NewServer(&mcp.Implementation{Name: "echoserver", Version: "1"}, nil)
	addTools(s)
	boundTools(s)
	if *httpAddr != "" {
		serveHTTP(s, *httpAddr)
		return
	}
	// Each end but a kill is said (a test tells them apart); a write to a
	// stdout closed already fails, instead of ending it unsaid.
	signal.Ignore(syscall.SIGPIPE)
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	go func() {
		<-term
		fmt.Fprintf(os.Stderr, "echoserver pid %d ended: SIGTERM\n", os.Getpid())
		os.Exit(1)
	}()
	err := s.Run(context.Background(), &mcp.StdioTransport{})
	fmt.Fprintf(os.Stderr, "echoserver pid %d ended: %v\n", os.Getpid(), err)
	if err != nil {
		os.Exit(1)
	}
}

func serveHTTP(s *mcp.Server, addr string) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("http://%s/mcp\n", l.Addr())
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	fmt.Fprintln(os.Stderr, http.Serve(l, h))
	os.Exit(1)
}

func addTools(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo text back."}, func(ctx context.Context, r *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, map[string]any, error) {
		n := max(in.Times, 1)
		out := ""
		for range n {
			out += in.Text
		}
		return nil, map[string]any{"echo": out, "pid": os.Getpid()}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Add two numbers."}, func(ctx context.Context, r *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, map[string]any, error) {
		return nil, map[string]any{"sum": in.A + in.B}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Fail with a message."}, func(ctx context.Context, r *mcp.CallToolRequest, in none) (*mcp.CallToolResult, any, error) {
		return nil, nil, fmt.Errorf("it failed on purpose")
	})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Exit the process."}, func(ctx context.Context, r *mcp.CallToolRequest, in none) (*mcp.CallToolResult, any, error) {
		fmt.Fprintln(os.Stderr, "echoserver: crashing on purpose")
		os.Exit(3)
		return nil, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "hang", Description: "Never answer."}, func(ctx context.Context, r *mcp.CallToolRequest, in none) (*mcp.CallToolResult, any, error) {
		select {
		case <-ctx.Done():
		case <-time.After(time.Hour):
		}
		return nil, nil, ctx.Err()
	})
}

func boundTools(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "big", Description: "A text result of size bytes."}, func(ctx context.Context, r *mcp.CallToolRequest, in bigIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", in.Size)}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "Echo text after ms milliseconds."}, func(ctx context.Context, r *mcp.CallToolRequest, in slowIn) (*mcp.CallToolResult, map[string]any, error) {
		time.Sleep(time.Duration(in.MS) * time.Millisecond)
		return nil, map[string]any{"echo": in.Text, "pid": os.Getpid()}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "once", Description: "Append a line to path, then exit."}, func(ctx context.Context, r *mcp.CallToolRequest, in onceIn) (*mcp.CallToolResult, any, error) {
		f, err := os.OpenFile(in.Path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintln(f, "paid")
			f.Close()
		}
		os.Exit(3)
		return nil, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "freeze", Description: "Stop the process (SIGSTOP)."}, func(ctx context.Context, r *mcp.CallToolRequest, in none) (*mcp.CallToolResult, any, error) {
		syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		// The stop reaches every thread a moment later: never answer, or
		// this thread could write the reply before it stops.
		select {}
	})
	mcp.AddTool(s, &mcp.Tool{Name: "env", Description: "The process's environment."}, func(ctx context.Context, r *mcp.CallToolRequest, in none) (*mcp.CallToolResult, map[string]any, error) {
		return nil, map[string]any{"env": os.Environ()}, nil
	})
}
