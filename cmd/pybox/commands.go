package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/pybox-dev/pybox/internal/app"
)

// Each subcommand has the settings it uses: serve all of them (the HTTP
// ones too), bench the stdio server's (it hands them to the servers it
// measures), the others fewer. A flag of a setting the command has not is
// refused, naming the command; its environment variable is ignored, and
// the setting keeps its default.
var (
	// runOmits: one program in a private tmpfs workspace, then exit.
	runOmits = append(slices.Clone(evalOmits), "max-code-size", "max-concurrent", "max-timeout", "warm-pool")
	// doctorSettings: the engine, image, runtime and folders it checks,
	// and the limits of its self-test's sandbox.
	doctorSettings = []string{"code-storage-dir", "state-dir", "image", "variant", "runtime", "backend", "k8s-namespace",
		"k8s-accept-unenforced", "kubeconfig", "memory", "cpus", "pids", "output-limit", "policy", "log-level"}
	// gcSettings: the leases and saved environments of one state dir.
	gcSettings = []string{"state-dir", "log-level"}
)

// commands are the subcommands that take settings, in the reference's order.
var commands = []string{"serve", "run", "eval", "bench", "doctor", "gc"}

// commandConfig is the named subcommand's configuration: the settings it has.
func commandConfig(name string) *config {
	switch name {
	case "serve":
		return &config{Config: app.Config{Serving: true}}
	case "run":
		return &config{omit: runOmits}
	case "eval":
		return &config{omit: evalOmits}
	case "doctor":
		return &config{omit: allBut(doctorSettings)}
	case "gc":
		return &config{omit: allBut(gcSettings)}
	}
	return &config{} // bench
}

// allBut lists every setting's flag but keep's.
func allBut(keep []string) []string {
	var omit []string
	for _, s := range everySetting() {
		if !slices.Contains(keep, s.flag) {
			omit = append(omit, s.flag)
		}
	}
	return omit
}

// everySetting is the settings of every subcommand together.
func everySetting() []setting { return (&config{Config: app.Config{Serving: true}}).allSettings() }

// has tells whether the command has the setting of this flag.
func (c *config) has(flag string) bool {
	return slices.ContainsFunc(c.settings(), func(s setting) bool { return s.flag == flag })
}

// commandsWith lists the subcommands that have the setting of this flag.
func commandsWith(flag string) []string {
	var out []string
	for _, cmd := range commands {
		if commandConfig(cmd).has(flag) {
			out = append(out, cmd)
		}
	}
	return out
}

// refuseOthers refuses, naming the command, the flags in args of settings
// the command has not. It reads args as fs.Parse will, with every
// setting's flag known, and changes nothing.
func (c *config) refuseOthers(fs *flag.FlagSet, args []string) error {
	shadow := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	shadow.SetOutput(io.Discard)
	fs.VisitAll(func(f *flag.Flag) { shadow.Var(flagName{boolFlag(f.Value)}, f.Name, "") })
	scratch := flag.NewFlagSet("scratch", flag.ContinueOnError)
	for _, s := range everySetting() {
		if shadow.Lookup(s.flag) == nil {
			s.bind(scratch, s.flag, "")
			shadow.Var(flagName{boolFlag(scratch.Lookup(s.flag).Value)}, s.flag, "")
		}
	}
	_ = shadow.Parse(args) // its errors (an unknown flag, -help) are fs.Parse's to report
	var errs []string
	shadow.Visit(func(f *flag.Flag) {
		if fs.Lookup(f.Name) == nil {
			errs = append(errs, fmt.Sprintf("pybox %s: --%s is not a setting of %s, but of %s; pybox %s --help lists %s's",
				fs.Name(), f.Name, fs.Name(), joinAnd(commandsWith(f.Name)), fs.Name(), fs.Name()))
		}
	})
	if len(errs) == 0 {
		return nil
	}
	fmt.Fprintln(fs.Output(), strings.Join(errs, "\n"))
	return errUsage
}

// keepConsistent raises a default of a setting the command has not where
// it would contradict one it has: max-timeout is at least --timeout.
func (c *config) keepConsistent() {
	if !c.uses("max-timeout") && c.MaxTimeout < c.Timeout {
		c.MaxTimeout = c.Timeout
	}
}

// flagName is a flag that only takes its place on the command line.
type flagName struct{ isBool bool }

func (f flagName) String() string   { return "" }
func (f flagName) Set(string) error { return nil }
func (f flagName) IsBoolFlag() bool { return f.isBool }

// boolFlag tells whether v is a flag that takes no value.
func boolFlag(v flag.Value) bool {
	b, ok := v.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// forwardable keeps, of flags ("--name=value") forwarded to a child pybox,
// those its command has: the child would refuse the others.
func forwardable(cmd string, forward []string) []string {
	c := commandConfig(cmd)
	var out []string
	for _, f := range forward {
		name, _, _ := strings.Cut(strings.TrimLeft(f, "-"), "=")
		if c.has(name) {
			out = append(out, f)
		}
	}
	return out
}

// joinAnd joins words as "a, b and c".
func joinAnd(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}
