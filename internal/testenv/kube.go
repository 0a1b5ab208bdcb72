package testenv

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// ControlPlane is a real etcd and kube-apiserver, started from the
// binaries in $PYBOX_K8S_BIN (built by .ci/run from .ci/k8s).
type ControlPlane struct {
	Dir   string       // certificates, tokens, etcd's data, logs
	Admin *rest.Config // system:masters
	URL   string       // https://127.0.0.1:PORT
	CA    []byte       // the serving certificate (PEM)
	procs []proc
}

type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once it has been reaped
}

// KubeBin is the folder of the Kubernetes binaries, or "" when they are
// absent. Tests that need a control plane skip then, unless
// PYBOX_REQUIRE_K8S is set (CI), when they fail.
func KubeBin(t testing.TB) string {
	t.Helper()
	SkipShort(t, "the Kubernetes binaries")
	dir := os.Getenv("PYBOX_K8S_BIN")
	waitKubeBuild(t)
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(dir, b)); dir == "" || err != nil {
			if os.Getenv("PYBOX_REQUIRE_K8S") != "" {
				t.Fatalf("PYBOX_REQUIRE_K8S is set but %s is not in PYBOX_K8S_BIN=%q (.ci/run builds it)", b, dir)
			}
			t.Skipf("no Kubernetes binaries (set PYBOX_K8S_BIN to where .ci/run builds them; missing %s)", b)
		}
	}
	return dir
}

// waitKubeBuild waits, when .ci/run builds the binaries in the background
// (on a machine without them, while the tests that do not need them run),
// until that build has ended: PYBOX_K8S_BUILD names a file the build
// writes "ok" or "failed" into when it ends.
func waitKubeBuild(t testing.TB) {
	t.Helper()
	if status := os.Getenv("PYBOX_K8S_BUILD"); status != "" {
		waitBuildStatus(t, status)
	}
}

// waitBuildStatus waits until the file status holds the build's end,
// looking every 100 ms (a file another process writes: no event to wait
// on), and fails t when the build failed.
func waitBuildStatus(t testing.TB, status string) {
	t.Helper()
	start := time.Now()
	for {
		b, err := os.ReadFile(status)
		switch s := strings.TrimSpace(string(b)); {
		case err == nil && s == "ok":
			if waited := time.Since(start); waited > time.Second {
				t.Logf("waited %v for the background build of the Kubernetes binaries", waited.Round(time.Second))
			}
			return
		case err == nil && s != "":
			t.Fatalf("the background build of the Kubernetes binaries %s (its log: %s.log)", s, status)
		case time.Since(start) > 30*time.Minute:
			t.Fatalf("the background build of the Kubernetes binaries did not end within 30 minutes (its log: %s.log)", status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// StartControlPlane starts etcd and kube-apiserver (RBAC on, tokens from a
// file, service-account tokens signed) in dir and waits until the API
// server is ready. Stop ends them.
func StartControlPlane(bin, dir string) (*ControlPlane, error) {
	cp := &ControlPlane{Dir: dir}
	ok := false
	defer func() {
		if !ok {
			cp.Stop()
		}
	}()
	cert, key, err := selfSigned()
	if err != nil {
		return nil, err
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	saPub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{
		"serving.crt": cert, "serving.key": key,
		"sa.key":     pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)}),
		"sa.pub":     pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub}),
		"tokens.csv": []byte("admin-token,admin,admin-uid,system:masters\n"),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return nil, err
		}
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	if err := cp.start(filepath.Join(bin, "etcd"), "etcd.log", "--name", "k", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL, "--listen-peer-urls", peerURL,
		"--initial-advertise-peer-urls", peerURL, "--initial-cluster", "k="+peerURL); err != nil {
		return nil, err
	}
	f := func(n string) string { return filepath.Join(dir, n) }
	if err := cp.start(filepath.Join(bin, "kube-apiserver"), "apiserver.log", "--etcd-servers="+etcdURL, "--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(ports[2]), "--advertise-address=127.0.0.1", "--tls-cert-file="+f("serving.crt"),
		"--tls-private-key-file="+f("serving.key"), "--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+f("sa.pub"), "--service-account-signing-key-file="+f("sa.key"),
		"--authorization-mode=RBAC", "--token-auth-file="+f("tokens.csv"), "--service-cluster-ip-range=10.0.0.0/24",
		"--endpoint-reconciler-type=none", "--kubelet-preferred-address-types=Hostname"); err != nil {
		return nil, err
	}
	cp.CA = cert
	cp.URL = fmt.Sprintf("https://127.0.0.1:%d", ports[2])
	cp.Admin = cp.Config("admin-token")
	if err := cp.waitReady(90 * time.Second); err != nil {
		return nil, err
	}
	ok = true
	return cp, nil
}

// Config is a client configuration for this API server with token.
func (cp *ControlPlane) Config(token string) *rest.Config {
	return &rest.Config{Host: cp.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: cp.CA}}
}

// Kubeconfig writes a kubeconfig for token and namespace and returns its path.
func (cp *ControlPlane) Kubeconfig(name, token, namespace string) (string, error) {
	ca := filepath.Join(cp.Dir, "serving.crt")
	body := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: %q, certificate-authority: %q}
users:
- name: %s
  user: {token: %q}
contexts:
- name: test
  context: {cluster: test, user: %s, namespace: %q}
current-context: test
`, cp.URL, ca, name, token, name, namespace)
	p := filepath.Join(cp.Dir, name+".kubeconfig")
	return p, os.WriteFile(p, []byte(body), 0o600)
}

func (cp *ControlPlane) start(bin, logName string, args ...string) error {
	p, err := startProc(cp.Dir, bin, logName, args...)
	if err == nil {
		cp.procs = append(cp.procs, p)
	}
	return err
}

// startProc starts bin with its output in dir/logName; it is killed if
// the test process dies.
func startProc(dir, bin, logName string, args ...string) (proc, error) {
	log, err := os.Create(filepath.Join(dir, logName))
	if err != nil {
		return proc{}, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = orphanGuard() // never outlives the tests
	if err := cmd.Start(); err != nil {
		log.Close()
		return proc{}, fmt.Errorf("start %s: %w", filepath.Base(bin), err)
	}
	p := proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		log.Close()
		close(p.done)
	}()
	return p, nil
}

// stopProcs ends procs, last started first: SIGTERM, then SIGKILL after 10 s.
func stopProcs(procs []proc) {
	for i := len(procs) - 1; i >= 0; i-- {
		p := procs[i]
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
}

func (cp *ControlPlane) waitReady(limit time.Duration) error {
	tr, err := rest.TransportFor(cp.Admin)
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		resp, err := hc.Get(cp.URL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	return fmt.Errorf("kube-apiserver not ready within %v; its log ends:\n%s", limit, tail(filepath.Join(cp.Dir, "apiserver.log"), 4000))
}

// Stop kills the API server and etcd.
func (cp *ControlPlane) Stop() {
	stopProcs(cp.procs)
	cp.procs = nil
}

// selfSigned makes the API server's serving certificate and key (PEM).
func selfSigned() ([]byte, []byte, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IsCA:        true, BasicConstraintsValid: true,
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), nil
}

// freePorts returns n ports free on 127.0.0.1 a moment ago, drawn at
// random below the kernel's ephemeral range (32768 and up by default), and
// never twice in one test process: a port the kernel hands to a ":0"
// listener or an outgoing connection of a test running beside (the way
// ports used to be picked here) cannot take one of these between the
// pick and the node's bind (seen: a kubelet's "bind: address already in
// use" beside the parallel tests).
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			return nil, fmt.Errorf("no free port below the ephemeral range after %d tries", tries)
		}
		p := portsLow + mrand.IntN(portsHigh-portsLow)
		if _, taken := portsGiven.LoadOrStore(p, true); taken {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue // in use: another draw
		}
		ls = append(ls, l)
		ports = append(ports, p)
	}
	return ports, nil
}

// portsLow and portsHigh bound freePorts' draws; portsGiven holds every
// port it has handed out in this process.
const portsLow, portsHigh = 20000, 32000

var portsGiven sync.Map

// WaitFor polls cond until it holds or ctx ends.
func WaitFor(ctx context.Context, cond func() bool) bool {
	for !cond() {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
	return true
}
