// Command pause is the pod sandbox's placeholder process for the test
// node's containerd (there is no registry to pull the usual one from): it
// waits for SIGTERM or SIGINT and reaps nothing else.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
