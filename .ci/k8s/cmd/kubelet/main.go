// Command kubelet is Kubernetes' node agent, built from the module proxy
// for the Kubernetes-backend node tests.
package main

import (
	"context"
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	"k8s.io/kubernetes/cmd/kubelet/app"
)

func main() { os.Exit(cli.Run(app.NewKubeletCommand(context.Background()))) }
