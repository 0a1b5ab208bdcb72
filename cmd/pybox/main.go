// Command pybox is an MCP server that runs Python in locked-down, ephemeral
// Docker containers, plus the command-line tools around it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// version and commit are set at build time (.ci/release):
// -ldflags "-X main.version=v1.2.3 -X main.commit=<git sha>".
var version, commit = "dev", ""

const usage = `pybox runs Python safely: every program in a fresh, locked-down Docker container.

Usage:
  pybox [serve] [flags]          MCP server over stdio (the default); --http ADDR: over streamable HTTP, many tenants
  pybox run [flags] FILE|-       run one Python file (or stdin) and exit with its exit code
  pybox eval [flags] FILE.jsonl  run a batch of programs (with their tests), each in its own sandbox: a verdict per program
                                 (--problems P.jsonl: HumanEval/MBPP/stdin-stdout completions, human-eval's results, pass@k)
  pybox image build [flags]      build the runtime image (--offline: no registry, no PyPI)
  pybox doctor [flags]           check Docker, the runtime image, runtimes and isolation
  pybox bench [flags]            measure latency through a real MCP client
  pybox gc [--all] [--dry-run]   remove gone servers' leftover containers and unused package-layer images
  pybox version                  print the version (also: pybox --version)

Run "pybox COMMAND --help" for a command's flags: each command has the settings
it uses, and refuses the others'. Every flag can also be set by the environment
variable shown in its help; a flag on the command line wins.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches a subcommand and returns the process exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmd, named := "serve", false
	if len(args) > 0 && (args[0] == "" || args[0][0] != '-') {
		cmd, args, named = args[0], args[1:], true
	}
	if !named && len(args) == 1 { // "pybox --help" lists the commands; "pybox serve --help" gives serve's flags
		switch args[0] {
		case "-h", "-help", "--help":
			cmd, args = "help", nil
		case "-version", "--version", "-v":
			cmd, args = "version", nil
		}
	}
	var err error
	switch cmd {
	case "serve":
		err = serveCmd(ctx, args, stdin, stdout, stderr)
	case "run":
		return runCmd(ctx, args, stdin, stdout, stderr)
	case "eval":
		return evalCmd(ctx, args, stdin, stdout, stderr)
	case "image":
		err = imageCmd(ctx, args, stderr)
	case "doctor":
		return doctorCmd(ctx, args, stdout, stderr)
	case "bench":
		err = benchCmd(ctx, args, stdout, stderr)
	case "gc":
		err = gcCmd(ctx, args, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, versionLine())
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "pybox: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	return exitCode(err, stderr)
}

// exitCode reports err on stderr and maps it to an exit status.
func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	}
	fmt.Fprintln(stderr, "pybox:", err)
	return 1
}

// errUsage marks a usage error already reported by the flag package.
var errUsage = errors.New("usage error")

// newFlags returns a flag set that reports errors instead of exiting.
func newFlags(name, synopsis string, stderr io.Writer, c *config) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		if r, ok := stderr.(flagsReporter); ok { // the configuration reference's generator (configdoc_test.go)
			r.reportFlags(synopsis, fs, c)
			return
		}
		fmt.Fprintf(stderr, "Usage: %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
		if c != nil {
			fmt.Fprintf(stderr, "\nEnvironment variables (a flag on the command line wins):\n%s", envHelp(c))
		}
	}
	return fs
}

// flagsReporter takes a command's flags where its --help would print them.
type flagsReporter interface {
	reportFlags(synopsis string, fs *flag.FlagSet, c *config)
}

// parse parses flags, mapping flag errors to errUsage.
func parse(fs *flag.FlagSet, c *config, args []string) error {
	var err error
	if c != nil {
		err = c.parseFlags(fs, args)
	} else {
		err = fs.Parse(args)
	}
	if err != nil && !errors.Is(err, flag.ErrHelp) && fs.Parsed() {
		return fmt.Errorf("%w", err) // an environment variable was invalid
	}
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return errUsage
	}
	return err
}
