//go:build !windows

package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/pybox-dev/pybox/internal/testenv"
)

// kubeBattery is the part of the hostile batteries run against Docker and
// gVisor (TestHostileBattery, TestIsolationBattery, the resource tests)
// that does not read the server's code storage on this host (with pods,
// the workspace lives in the pod): the same functions, their servers
// pointed at a test node by eachKubeRuntime. TestKubernetesPodLimits runs
// it, on its node.
var kubeBattery = map[string]func(t *testing.T){
	"escapes and fills":                   hostileBattery,
	"output flood":                        testOutputFlood,
	"memory bomb":                         testMemoryBomb,
	"fork bomb":                           testForkBomb,
	"session timeout, OOM and exit":       testSessionTimeoutAndOOMRecover,
	"stateless runs see no session files": attackSessionFilesVisible,
	"modules planted in a session":        attackPlantedSessionModules,
	"forged protocol frames in a session": attackForgedSessionFrames,
	"forged verdict in a stateless run":   attackForgedRunVerdict,
}

// eachKubeRuntime runs f as a subtest under each runtime of the test
// node cs serves: servers started in it get env (PYBOX_BACKEND=kubernetes
// and the node's kubeconfig) and run their sandboxes as pods of that
// RuntimeClass: the default (runc), and runsc (gVisor) when the node has
// it, which PYBOX_REQUIRE_RUNSC requires.
func eachKubeRuntime(t *testing.T, cs kubernetes.Interface, env []string, f func(t *testing.T)) {
	runtimes := []string{""}
	_, err := cs.NodeV1().RuntimeClasses().Get(t.Context(), testenv.RunscClass, metav1.GetOptions{})
	switch {
	case err == nil:
		runtimes = append(runtimes, testenv.RunscClass)
	case !apierrors.IsNotFound(err):
		t.Fatal(err)
	case os.Getenv("PYBOX_REQUIRE_RUNSC") != "":
		t.Fatal("PYBOX_REQUIRE_RUNSC is set but the test node has no runsc runtime: containerd-shim-runsc-v1 or runsc is not on PATH (.ci/run installs them)")
	default:
		t.Log("no containerd-shim-runsc-v1 and runsc on PATH: pods run under runc only")
	}
	for _, rt := range runtimes {
		t.Run(testenv.RuntimeName(rt), func(t *testing.T) {
			serverRuntimes.Store(t.Name(), rt)
			serverEnvs.Store(t.Name(), env)
			t.Cleanup(func() { serverRuntimes.Delete(t.Name()); serverEnvs.Delete(t.Name()) })
			start := time.Now()
			f(t)
			t.Logf("under %s: %v", testenv.RuntimeName(rt), time.Since(start).Round(time.Millisecond))
		})
	}
}

// refusedWithoutRuntimeClass: a PYBOX_RUNTIME naming a RuntimeClass the
// cluster lacks stops pybox at start, with an error that names it.
func refusedWithoutRuntimeClass(t *testing.T, env []string) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	serve := exec.CommandContext(ctx, pyboxBin, "serve")
	serve.Env = append(append(os.Environ(), env...), "PYBOX_RUNTIME=no-such-class", "PYBOX_BUILD=never",
		"CODE_STORAGE_DIR="+t.TempDir(), "PYBOX_STATE_DIR="+t.TempDir())
	if out, err := serve.CombinedOutput(); err == nil || !strings.Contains(string(out), `no RuntimeClass "no-such-class"`) {
		t.Errorf("pybox serve with a RuntimeClass the cluster lacks: %v\n%s", err, out)
	}
}
