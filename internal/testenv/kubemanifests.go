package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// Manifests are the namespaces and RBAC objects pybox ships in
// cmd/pybox/kubernetes (namespace.yaml, rbac.yaml), as users apply them.
type Manifests struct {
	Namespaces []*corev1.Namespace
	Accounts   []*corev1.ServiceAccount
	Roles      []*rbacv1.Role
	Bindings   []*rbacv1.RoleBinding
	// ClusterRoles and ClusterBindings: reading RuntimeClasses, cluster-wide.
	ClusterRoles    []*rbacv1.ClusterRole
	ClusterBindings []*rbacv1.ClusterRoleBinding
}

// ReadManifests reads namespace.yaml and rbac.yaml from dir (the path of
// cmd/pybox/kubernetes from the test's package); any other kind, or a
// field the type does not have, is an error.
func ReadManifests(dir string) (Manifests, error) {
	var m Manifests
	for _, name := range []string{"namespace.yaml", "rbac.yaml"} {
		raw, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return m, err
		}
		for _, doc := range strings.Split(string(raw), "\n---\n") {
			if err := m.add(doc); err != nil {
				return m, fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	if len(m.Namespaces) != 2 || len(m.Accounts) != 1 || len(m.Roles) != 1 || len(m.Bindings) != 1 || len(m.ClusterRoles) != 1 || len(m.ClusterBindings) != 1 {
		return m, fmt.Errorf("manifests in %s: want 2 namespaces, a ServiceAccount, a Role, a RoleBinding, a ClusterRole and its binding", dir)
	}
	return m, nil
}

func (m *Manifests) add(doc string) error {
	var kind struct{ Kind string }
	if err := yaml.Unmarshal([]byte(doc), &kind); err != nil {
		return err
	}
	var target any
	switch kind.Kind {
	case "Namespace":
		target = appendNew(&m.Namespaces)
	case "ServiceAccount":
		target = appendNew(&m.Accounts)
	case "Role":
		target = appendNew(&m.Roles)
	case "RoleBinding":
		target = appendNew(&m.Bindings)
	case "ClusterRole":
		target = appendNew(&m.ClusterRoles)
	case "ClusterRoleBinding":
		target = appendNew(&m.ClusterBindings)
	default:
		return fmt.Errorf("unexpected kind %q", kind.Kind)
	}
	return yaml.UnmarshalStrict([]byte(doc), target)
}

func appendNew[T any](s *[]*T) *T {
	v := new(T)
	*s = append(*s, v)
	return v
}

// SandboxNamespace is the namespace the Role lets pybox use.
func (m Manifests) SandboxNamespace() string { return m.Roles[0].Namespace }

// ApplyAccounts creates the namespaces and the ServiceAccount (and each
// namespace's default ServiceAccount, which no controller makes here);
// ApplyRBAC the roles and their bindings. Objects already there are kept.
func (m Manifests) ApplyAccounts(ctx context.Context, cs kubernetes.Interface) error {
	for _, ns := range m.Namespaces {
		if err := exists(cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})); err != nil {
			return err
		}
		def := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
		if err := exists(cs.CoreV1().ServiceAccounts(ns.Name).Create(ctx, def, metav1.CreateOptions{})); err != nil {
			return err
		}
	}
	for _, sa := range m.Accounts {
		if err := exists(cs.CoreV1().ServiceAccounts(sa.Namespace).Create(ctx, sa, metav1.CreateOptions{})); err != nil {
			return err
		}
	}
	return nil
}

// ApplyRBAC creates the Role, the ClusterRole and their bindings.
func (m Manifests) ApplyRBAC(ctx context.Context, cs kubernetes.Interface) error {
	for _, r := range m.ClusterRoles {
		if err := exists(cs.RbacV1().ClusterRoles().Create(ctx, r, metav1.CreateOptions{})); err != nil {
			return err
		}
	}
	for _, b := range m.ClusterBindings {
		if err := exists(cs.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{})); err != nil {
			return err
		}
	}
	for _, r := range m.Roles {
		if err := exists(cs.RbacV1().Roles(r.Namespace).Create(ctx, r, metav1.CreateOptions{})); err != nil {
			return err
		}
	}
	for _, b := range m.Bindings {
		if err := exists(cs.RbacV1().RoleBindings(b.Namespace).Create(ctx, b, metav1.CreateOptions{})); err != nil {
			return err
		}
	}
	return nil
}

func exists[T any](_ T, err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// Token asks the API server for a token of ServiceAccount name in ns.
func Token(ctx context.Context, cs kubernetes.Interface, ns, name string) (string, error) {
	exp := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token of %s/%s: %w", ns, name, err)
	}
	return tr.Status.Token, nil
}

// SandboxKubeconfig applies the manifests in dir to cp, as an operator
// would, and returns a kubeconfig for pybox's ServiceAccount whose
// namespace is the sandboxes' one, and that namespace.
func SandboxKubeconfig(ctx context.Context, cp *ControlPlane, dir string) (kubeconfig, ns string, err error) {
	m, err := ReadManifests(dir)
	if err != nil {
		return "", "", err
	}
	cs, err := kubernetes.NewForConfig(cp.Admin)
	if err != nil {
		return "", "", err
	}
	if err := m.ApplyAccounts(ctx, cs); err != nil {
		return "", "", err
	}
	if err := m.ApplyRBAC(ctx, cs); err != nil {
		return "", "", err
	}
	sa := m.Accounts[0]
	token, err := Token(ctx, cs, sa.Namespace, sa.Name)
	if err != nil {
		return "", "", err
	}
	ns = m.SandboxNamespace()
	if err := waitAllowed(ctx, cp.Config(token), ns); err != nil {
		return "", "", err
	}
	kubeconfig, err = cp.Kubeconfig(sa.Name, token, ns)
	return kubeconfig, ns, err
}

// waitAllowed waits (up to 30 s) until the RBAC just applied lets the
// account of rc create pods in ns.
func waitAllowed(ctx context.Context, rc *rest.Config, ns string) error {
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	review := &authzv1.SelfSubjectAccessReview{Spec: authzv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authzv1.ResourceAttributes{Namespace: ns, Verb: "create", Resource: "pods"}}}
	if !WaitFor(wait, func() bool {
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(wait, review, metav1.CreateOptions{})
		return err == nil && r.Status.Allowed
	}) {
		return fmt.Errorf("pybox's account may not create pods in %s 30 s after the Role was bound", ns)
	}
	return nil
}
