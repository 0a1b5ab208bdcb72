// Command testnode starts the Kubernetes test node the tests use (a
// control plane, and a node: a containerd of its own, a bridge CNI, the
// kubelet and the scheduler; see internal/testenv), applies the accounts
// and the Role of cmd/pybox/kubernetes as TestKubernetesNode does, writes
// the kubeconfig of pybox's ServiceAccount and prints its path, then waits
// for SIGINT or SIGTERM and removes everything it made. It needs root, the
// binaries .ci/run builds (PYBOX_K8S_BIN) and the image in the local
// Docker daemon. To measure pods beside Docker (docs/bench.md):
//
//	go run ./internal/testenv/cmd/testnode -image pybox-runtime:base &
//	PYBOX_IMAGE=pybox-runtime:base PYBOX_K8S_ACCEPT_UNENFORCED=networkpolicy,pids \
//	  pybox bench -n 20 -kubernetes KUBECONFIG
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/pybox-dev/pybox/internal/testenv"
)

func main() {
	image := flag.String("image", "pybox-runtime:base", "the runtime image (a tag in the local Docker daemon) the node gets")
	manifests := flag.String("manifests", "cmd/pybox/kubernetes", "the folder of pybox's manifests")
	flag.Parse()
	bin := os.Getenv("PYBOX_K8S_BIN")
	if why := testenv.KubeNodeReady(bin); why != "" {
		log.Fatalf("no test node here: %s (PYBOX_K8S_BIN=%q)", why, bin)
	}
	if err := run(bin, *image, *manifests); err != nil {
		log.Fatal(err)
	}
}

func run(bin, image, manifests string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := os.MkdirTemp("", "pybox-testnode-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cp, err := testenv.StartControlPlane(bin, dir)
	if err != nil {
		return err
	}
	defer cp.Stop()
	node, err := testenv.StartNode(cp, bin, image)
	if err != nil {
		return err
	}
	defer node.Stop()
	kubeconfig, ns, err := testenv.SandboxKubeconfig(ctx, cp, manifests)
	if err != nil {
		return err
	}
	fmt.Printf("KUBECONFIG=%s\nnamespace %s, image %s, RuntimeClass runsc: %v\n", kubeconfig, ns, image, node.Runsc)
	<-ctx.Done()
	return nil
}
