// Command kube-scheduler places the test node's pods, built from the
// module proxy for the Kubernetes-backend node tests.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() { os.Exit(cli.Run(app.NewSchedulerCommand())) }
