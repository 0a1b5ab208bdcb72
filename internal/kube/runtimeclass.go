package kube

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// checkRuntimeClass makes sure the RuntimeClass pods will name exists
// (PYBOX_RUNTIME on Kubernetes is the pods' runtimeClassName): without it
// every pod would be refused at creation, one run at a time.
func checkRuntimeClass(ctx context.Context, cs kubernetes.Interface, name string) error {
	if name == "" {
		return nil
	}
	_, err := cs.NodeV1().RuntimeClasses().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("kubernetes: PYBOX_RUNTIME=%s names the pods' RuntimeClass, and the cluster has no RuntimeClass %q: "+
			"create one whose handler is the nodes' runtime (for gVisor: handler runsc, containerd's runsc shim on the nodes), "+
			"or unset PYBOX_RUNTIME for the cluster's default: %w", name, name, err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("kubernetes: get RuntimeClass %q: forbidden (pybox's account needs the ClusterRole in cmd/pybox/kubernetes "+
			"to check the runtime PYBOX_RUNTIME names): %w", name, err)
	case err != nil:
		return fmt.Errorf("kubernetes: get RuntimeClass %q: %w", name, err)
	}
	return nil
}

// GVisorRuntimeClass is the name of the cluster's RuntimeClass for gVisor,
// by the names it usually has (runsc, gvisor), or "" when it has neither;
// kubeconfig as in Config. It reads them with get, which pybox's
// ClusterRole allows.
func GVisorRuntimeClass(ctx context.Context, kubeconfig string) (string, error) {
	rc, _, err := restConfig(kubeconfig)
	if err != nil {
		return "", err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return "", err
	}
	for _, name := range []string{"runsc", "gvisor"} {
		_, err := cs.NodeV1().RuntimeClasses().Get(ctx, name, metav1.GetOptions{})
		switch {
		case err == nil:
			return name, nil
		case !apierrors.IsNotFound(err):
			return "", fmt.Errorf("kubernetes: get RuntimeClass %q: %w", name, err)
		}
	}
	return "", nil
}
