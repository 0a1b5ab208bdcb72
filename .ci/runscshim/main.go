//go:build linux

// Command runscshim is the Kubernetes test node's containerd-shim-runsc-v1
// (.ci/run installs it): it runs gVisor's shim, installed beside it as
// containerd-shim-runsc-v1.gvisor, and adapts one answer for Debian's
// containerd 1.6. gVisor's shim is built on containerd 2's shim library,
// whose start action prints its bootstrap parameters as JSON
// ({"version":2,"address":"unix://...","protocol":"ttrpc"}); containerd
// 1.6 reads that output as the socket address itself. For start, this
// prints the address alone (task API v2 over ttrpc, which 1.6 speaks);
// every other action is gVisor's shim itself (exec).
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"syscall"
)

func main() {
	self, err := os.Executable()
	if err != nil {
		fail(err)
	}
	shim := self + ".gvisor"
	if !slices.Contains(os.Args[1:], "start") {
		fail(syscall.Exec(shim, append([]string{shim}, os.Args[1:]...), os.Environ()))
	}
	cmd := exec.Command(shim, os.Args[1:]...)
	cmd.Stdin, cmd.Stderr = os.Stdin, os.Stderr
	out, err := cmd.Output()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		os.Stdout.Write(out)
		os.Exit(ee.ExitCode())
	} else if err != nil {
		fail(err)
	}
	os.Stdout.Write(address(out))
}

// address is the socket address in a start action's output: the JSON
// bootstrap parameters' address, or the output itself when it is plain.
func address(out []byte) []byte {
	var params struct {
		Address string `json:"address"`
	}
	if bytes.HasPrefix(bytes.TrimSpace(out), []byte("{")) && json.Unmarshal(out, &params) == nil && params.Address != "" {
		return []byte(params.Address)
	}
	return out
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "containerd-shim-runsc-v1 (pybox's adapter):", err)
	os.Exit(1)
}
