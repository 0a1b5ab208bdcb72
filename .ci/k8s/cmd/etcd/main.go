// Command etcd is the API server's store, built from the module proxy for
// the Kubernetes-backend tests.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
