//go:build !windows

package main

import (
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// kubeEgressProgram fetches the allowed names over HTTP and HTTPS (the
// test's CA passed in: a pod sees no host file; the test's certificate is
// for example.com), and tries a name off the list.
const kubeEgressProgram = `import ssl, urllib.request
def get(url, ctx=None):
    try:
        return urllib.request.urlopen(url, timeout=30, context=ctx).read().decode()
    except Exception as e:
        return "ERR %%s" %% e
ctx = ssl.create_default_context(cadata=%q)
print(get("http://api.test:%s/"))
print(get("https://example.com:%s/", ctx))
print(get("http://other.test:%s/"))
`

// TestKubernetesEgress drives the real binary with pods on a test node
// and an egress allowlist: a pod (whose NetworkPolicy stays deny-all; the
// test node's bridge CNI gives it an eth0 it does not enforce, so the
// names resolve only in the server's proxy) reaches the allowed names
// over HTTP and HTTPS through the server's proxy, carried over the pod's
// attach channel (internal/egressmux); another name is refused; the
// result's network line reports both. Then a session does the same over
// its own channel.
func TestKubernetesEgress(t *testing.T) {
	k := kubeTest(t)
	kubeconfig, image := k.kubeconfig, k.image
	hello := func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "hello %s %s", r.Host, r.Proto) }
	plain := httptest.NewServer(http.HandlerFunc(hello))
	defer plain.Close()
	secure := httptest.NewTLSServer(http.HandlerFunc(hello))
	defer secure.Close()
	hp := plain.URL[strings.LastIndexByte(plain.URL, ':')+1:]
	tp := secure.URL[strings.LastIndexByte(secure.URL, ':')+1:]
	ca := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: secure.Certificate().Raw}))
	s := startServer(t, "PYBOX_BACKEND=kubernetes", "KUBECONFIG="+kubeconfig, k8sAccept, "PYBOX_IMAGE="+image, "PYBOX_WARM_POOL=1",
		"PYBOX_EGRESS_ALLOW=api.test:"+hp+",example.com:"+tp, "PYBOX_EGRESS_ALLOW_ADDRS=127.0.0.1",
		"PYBOX_EGRESS_TEST_HOSTS=api.test=127.0.0.1,example.com=127.0.0.1,other.test=127.0.0.1")
	code := fmt.Sprintf(kubeEgressProgram, ca, hp, tp, hp)
	want := "hello api.test:" + hp + " HTTP/1.1\nhello example.com:" + tp + " HTTP/1.1\nERR HTTP Error 403"
	for _, args := range []map[string]any{
		{"code": code, "timeout_s": 120},
		{"code": code, "timeout_s": 120, "session_id": "net"},
	} {
		out, res := s.exec(args)
		if out.ExitCode != 0 || !strings.HasPrefix(out.Stdout, want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %q...", args["session_id"], out.ExitCode, out.Stdout, out.Stderr, want)
		}
		for _, w := range []string{"network: ", "allowed api.test:" + hp + " (1 connection,", "allowed example.com:" + tp + " (1 connection,",
			"refused other.test:" + hp + " (not on the allowlist)"} {
			if !strings.Contains(text(res), w) {
				t.Errorf("%v: the result lacks %q:\n%s", args["session_id"], w, text(res))
			}
		}
	}
}
