package engine

import (
	"fmt"
	"strings"
)

// remedy is what to do when no engine answers.
const remedy = "Start your container engine (Docker Desktop, Colima, OrbStack, Rancher Desktop, Podman machine or dockerd) and try again. " +
	"If it listens somewhere else, set DOCKER_HOST to its socket (for a desktop app such as Claude Desktop, in the \"env\" of pybox's entry " +
	"in the app's MCP config: apps started from the Dock or the Start menu do not get your shell's variables), or select it with " +
	"`docker context use`. `pybox doctor` shows this list."

// Why says which engine was chosen and why, in one line.
func (ch Choice) Why() string {
	c := ch.chosen
	switch {
	case c.Explicit && ch.Found:
		return fmt.Sprintf("%s (named by %s, which the docker CLI also uses)", ch.Host, c.Source)
	case c.Explicit:
		return fmt.Sprintf("%s (named by %s) does not answer", ch.Host, c.Source)
	case ch.Found:
		return fmt.Sprintf("%s (%s): the first of the usual places that answered; DOCKER_HOST and DOCKER_CONTEXT are not set", ch.Host, c.Source)
	}
	return "no engine answered in any of the places pybox looked"
}

// Places lists every place tried and what it gave, one per line.
func (ch Choice) Places() []string {
	var out []string
	for i, a := range ch.Tried {
		where := a.Source
		if a.Host != "" {
			where += " " + a.Host
		}
		out = append(out, fmt.Sprintf("%d. %s: %s", i+1, where, a.Result))
	}
	return out
}

// Report is the whole text for a failure to reach the engine: where pybox
// looked, what each place gave, and what to do.
func (ch Choice) Report(cause error) string {
	c := ch.chosen
	if c.Explicit {
		return fmt.Sprintf("Docker is not reachable at %s (named by %s): %s. pybox uses the engine %s names and looks nowhere else: "+
			"start that engine, or unset %s to let pybox look in the usual places (Docker Desktop, Colima, OrbStack, Rancher Desktop, Podman).",
			ch.Host, c.Source, causeText(cause), c.Source, strings.SplitN(c.Source, "=", 2)[0])
	}
	if ch.Found {
		return fmt.Sprintf("Docker is not reachable at %s (%s), which answered when pybox started: %s. Start that engine again "+
			"(`pybox doctor` shows where pybox looks).", ch.Host, c.Source, causeText(cause))
	}
	return "Docker is not reachable. pybox looked for a container engine in these places, in order:\n" +
		strings.Join(ch.Places(), "\n") + "\n" + remedy
}

func causeText(err error) string {
	if err == nil {
		return "no answer"
	}
	return pingError(err)
}

// UnreachableError is a failure to reach the engine; its text is the
// report of the client's discovery. It matches ErrUnreachable.
type UnreachableError struct {
	Text  string
	Cause error
}

func (e *UnreachableError) Error() string { return e.Text }

// Is matches ErrUnreachable.
func (e *UnreachableError) Is(target error) bool { return target == ErrUnreachable }

// Unwrap is the underlying failure.
func (e *UnreachableError) Unwrap() error { return e.Cause }
