package downstream

import (
	"io"
	"strings"
	"testing"
)

// TestIDScanner: the top-level id is found in any member order (the
// TypeScript SDK writes it after the result), never one nested in the
// result or inside a string.
func TestIDScanner(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"jsonrpc":"2.0","id":7,"result":{"x":1}}`, `7`},
		{`{"result":{"id":99,"content":[{"id":"n"}]},"jsonrpc":"2.0","id":"a\"b"}`, `"a\"b"`},
		{`{"result":"\"id\":5,","id" : -3 }`, `-3`},
		{`{"method":"notifications/progress","params":{"id":1}}`, ``},
		{`{"idx":1,"id":{"bad":1}}`, ``},
	} {
		var sc idScanner
		sc.feed([]byte(tc.in))
		if got := string(sc.id); got != tc.want {
			t.Errorf("%s: id %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestLineBound: lines within the bound pass as they are; a longer one
// is replaced by a refusal of its id, and the lines after it pass.
func TestLineBound(t *testing.T) {
	big := `{"result":{"text":"` + strings.Repeat("x", 300<<10) + `"},"jsonrpc":"2.0","id":4}`
	in := `{"id":1,"result":{}}` + "\n" + big + "\n" + `{"id":2,"result":{}}` + "\n"
	out, err := io.ReadAll(newLineBound(strings.NewReader(in), 100<<10))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != 3 || lines[0] != `{"id":1,"result":{}}` || lines[2] != `{"id":2,"result":{}}` ||
		!strings.Contains(lines[1], `"id":4`) || !strings.Contains(lines[1], "over pybox's limit of 100KiB") {
		t.Errorf("got %d lines: %.300q", len(lines), out)
	}
}
