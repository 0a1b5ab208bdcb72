package pep508

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var allowURLs = Policy{AllowURLs: true}

func TestParseRequirementAccepts(t *testing.T) {
	tests := []struct {
		spec    string
		policy  Policy
		wantStr string
		wantKey string
	}{
		{spec: "requests", wantStr: "requests", wantKey: "requests"},
		{spec: "  requests \n", wantStr: "requests", wantKey: "requests"},
		{spec: "Requests == 2.31.0", wantStr: "requests==2.31.0", wantKey: "requests"},
		{spec: "requests==2.31.0", wantStr: "requests==2.31.0", wantKey: "requests"},
		{spec: "numpy>=1.24,<2", wantStr: "numpy>=1.24,<2", wantKey: "numpy"},
		{spec: "numpy <2 , >= 1.24", wantStr: "numpy>=1.24,<2", wantKey: "numpy"},
		{spec: "numpy>=1.24,>=1.24", wantStr: "numpy>=1.24", wantKey: "numpy"},
		{spec: "numpy!=1.25.*,<2,>1.0,<=1.9,==1.*,~=1.2,===1.5", wantStr: "numpy===1.5,==1.*,~=1.2,>1.0,<=1.9,<2,!=1.25.*", wantKey: "numpy"},
		{spec: "pkg[extra1,Extra2]==1.0.post1", wantStr: "pkg[extra1,extra2]==1.0.post1", wantKey: "pkg"},
		{spec: "pkg [ b_x , a , A ]", wantStr: "pkg[a,b-x]", wantKey: "pkg"},
		{spec: "pkg[]>=1", wantStr: "pkg>=1", wantKey: "pkg"},
		{spec: "name (>=1.0)", wantStr: "name>=1.0", wantKey: "name"},
		{spec: "name ( >=1.0 , <3 )", wantStr: "name>=1.0,<3", wantKey: "name"},
		{spec: `foo; python_version<"3.12"`, wantStr: `foo; python_version < "3.12"`, wantKey: "foo"},
		{spec: `foo ; sys_platform == 'linux' and python_version >= "3.8"`, wantStr: `foo; sys_platform == "linux" and python_version >= "3.8"`, wantKey: "foo"},
		{spec: `foo; ( os_name=="nt" or 'linux' in sys_platform ) and extra not  in "a b"`, wantStr: `foo; (os_name == "nt" or "linux" in sys_platform) and extra not in "a b"`, wantKey: "foo"},
		{spec: `foo; platform_release == "5.1$(x)|&;"`, wantStr: `foo; platform_release == "5.1$(x)|&;"`, wantKey: "foo"},
		{spec: "zope.interface~=5.4", wantStr: "zope-interface~=5.4", wantKey: "zope-interface"},
		{spec: "pkg===1.0-weird", wantStr: "pkg===1.0-weird", wantKey: "pkg"},
		{spec: "Foo_Bar.baz", wantStr: "foo-bar-baz", wantKey: "foo-bar-baz"},
		{spec: "a", wantStr: "a", wantKey: "a"},
		{spec: "foo-1.0", wantStr: "foo-1-0", wantKey: "foo-1-0"},
		{spec: "torch==2.1.0+cpu", wantStr: "torch==2.1.0+cpu", wantKey: "torch"},
		{spec: "foo>=1.0rc1,<2.0.dev3", wantStr: "foo>=1.0rc1,<2.0.dev3", wantKey: "foo"},
		{spec: "foo==1.0-1", wantStr: "foo==1.0-1", wantKey: "foo"},
		{spec: "Pkg[x] @ https://example.com/pkg-1.0.tar.gz#sha256=abc", policy: allowURLs, wantStr: "pkg[x] @ https://example.com/pkg-1.0.tar.gz#sha256=abc", wantKey: "pkg"},
		{spec: `pkg@git+https://github.com/o/r@v1.0 ; os_name=="posix"`, policy: allowURLs, wantStr: `pkg @ git+https://github.com/o/r@v1.0 ; os_name == "posix"`, wantKey: "pkg"},
		{spec: "pkg @ file:///wheels/pkg-1.0-py3-none-any.whl", policy: allowURLs, wantStr: "pkg @ file:///wheels/pkg-1.0-py3-none-any.whl", wantKey: "pkg"},
		{spec: "pkg @ http://localhost:8080/pkg.whl", policy: allowURLs, wantStr: "pkg @ http://localhost:8080/pkg.whl", wantKey: "pkg"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			got, err := Parse(tt.spec, tt.policy)
			if err != nil {
				t.Fatalf("Parse(%q) error: %v", tt.spec, err)
			}
			if got.String() != tt.wantStr {
				t.Errorf("String() = %q, want %q", got.String(), tt.wantStr)
			}
			if got.Key != tt.wantKey {
				t.Errorf("Key = %q, want %q", got.Key, tt.wantKey)
			}
		})
	}
}

func TestParseRequirementFields(t *testing.T) {
	got, err := Parse(`Foo_Bar[Sec, docs]>=1.0, <2 ; python_version  >= "3.8"`, Policy{})
	if err != nil {
		t.Fatal(err)
	}
	want := Requirement{
		Name:      "Foo_Bar",
		Key:       "foo-bar",
		Extras:    []string{"docs", "sec"},
		Specifier: ">=1.0,<2",
		Marker:    `python_version >= "3.8"`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parse mismatch (-want +got):\n%s", diff)
	}
}

func TestParseRequirementRejects(t *testing.T) {
	tests := []struct {
		spec    string
		policy  Policy
		wantErr string
	}{
		{spec: "", wantErr: "empty package spec"},
		{spec: "   ", wantErr: "empty package spec"},
		{spec: "--index-url=x", wantErr: "pip options are not allowed"},
		{spec: "--index-url=http://x", wantErr: `"--index-url=http://x": pip options are not allowed; give a package name such as "requests>=2"`},
		{spec: "-r req.txt", wantErr: "pip options are not allowed"},
		{spec: "-e .", wantErr: "pip options are not allowed"},
		{spec: "--pre", wantErr: "pip options are not allowed"},
		{spec: "-c constraints.txt", wantErr: "pip options are not allowed"},
		{spec: "foo==1.0 --hash=sha256:abc", wantErr: "pip options are not allowed"},
		{spec: "requests; rm -rf /", wantErr: "invalid marker"},
		{spec: "requests && curl x", wantErr: "shell metacharacters are not allowed"},
		{spec: "$(id)", wantErr: "shell metacharacters are not allowed"},
		{spec: "`id`", wantErr: "shell metacharacters are not allowed"},
		{spec: "foo|bar", wantErr: "shell metacharacters are not allowed"},
		{spec: "foo>out", wantErr: "invalid version"},
		{spec: "foo<in", wantErr: "invalid version"},
		{spec: "foo<<1", wantErr: "invalid version"},
		{spec: "foo!", wantErr: "shell metacharacters are not allowed"},
		{spec: "foo==1!2.0", wantErr: "shell metacharacters are not allowed"},
		{spec: "foo*", wantErr: "shell metacharacters are not allowed"},
		{spec: "foo?", wantErr: "shell metacharacters are not allowed"},
		{spec: `foo\bar`, wantErr: "shell metacharacters are not allowed"},
		{spec: `foo"==1"`, wantErr: "shell metacharacters are not allowed"},
		{spec: "foo=='1'", wantErr: "shell metacharacters are not allowed"},
		{spec: "https://evil/x.whl", wantErr: "URLs and local paths are not allowed"},
		{spec: "git+https://github.com/o/r", wantErr: "URLs and local paths are not allowed"},
		{spec: "file:foo", wantErr: "URLs and local paths are not allowed"},
		{spec: "pkg @ https://x/y.whl", wantErr: "URLs and local paths are not allowed"},
		{spec: "pkg@1.0", wantErr: "URLs and local paths are not allowed"},
		{spec: "./local", wantErr: "URLs and local paths are not allowed"},
		{spec: ".", wantErr: "URLs and local paths are not allowed"},
		{spec: "/abs/path", wantErr: "URLs and local paths are not allowed"},
		{spec: "~/x", wantErr: "URLs and local paths are not allowed"},
		{spec: "dir/pkg", wantErr: "URLs and local paths are not allowed"},
		{spec: "x.whl", wantErr: "URLs and local paths are not allowed"},
		{spec: "x.tar.gz", wantErr: "URLs and local paths are not allowed"},
		{spec: "X.ZIP", wantErr: "URLs and local paths are not allowed"},
		{spec: "foo bar", wantErr: "expected a version specifier"},
		{spec: "foo[", wantErr: "unclosed ["},
		{spec: "foo[a,]", wantErr: "not a valid extra name"},
		{spec: "foo[a b]", wantErr: "not a valid extra name"},
		{spec: "foo[a]x", wantErr: "expected a version specifier"},
		{spec: "foo==", wantErr: "missing version after =="},
		{spec: "foo>=1,", wantErr: "empty version clause"},
		{spec: "foo>=1.0.*", wantErr: "wildcard .* is only allowed with == and !="},
		{spec: "foo==1.*.0", wantErr: "invalid version"},
		{spec: "foo==1.0.*+x", wantErr: "invalid version"},
		{spec: "foo>=1.0+local", wantErr: "local version label is only allowed"},
		{spec: "foo~=1", wantErr: "~= needs at least two release segments"},
		{spec: "foo==v1.0", wantErr: "invalid version"},
		{spec: "foo==latest", wantErr: "invalid version"},
		{spec: "foo (>=1.0", wantErr: "unclosed ("},
		{spec: "foo ()", wantErr: "empty version specifier"},
		{spec: "foo-", wantErr: "not a valid package name"},
		{spec: "_foo", wantErr: "not a valid package name"},
		{spec: ">=1.0", wantErr: "expected a package name"},
		{spec: "[x]", wantErr: "expected a package name"},
		{spec: `foo; os.system("x")`, wantErr: `unknown marker variable "os.system"`},
		{spec: `foo; python_version < "3" or __import__`, wantErr: `unknown marker variable "__import__"`},
		{spec: "foo;", wantErr: "empty marker"},
		{spec: `foo; python_version`, wantErr: "incomplete comparison"},
		{spec: `foo; python_version "3"`, wantErr: "expected a comparison operator"},
		{spec: `foo; python_version < "3`, wantErr: "unterminated string"},
		{spec: `foo; python_version < "3'"`, wantErr: "quotes and backslashes are not allowed"},
		{spec: `foo; python_version < '3\'`, wantErr: "quotes and backslashes are not allowed"},
		{spec: `foo; "a" == "b"`, wantErr: "one marker variable and one quoted string"},
		{spec: `foo; os_name == sys_platform`, wantErr: "one marker variable and one quoted string"},
		{spec: `foo; os_name not "x"`, wantErr: `"not" must be followed by "in"`},
		{spec: `foo; (os_name == "x"`, wantErr: "missing )"},
		{spec: `foo; os_name == "x")`, wantErr: "unexpected )"},
		{spec: `foo; os_name == "x" and`, wantErr: "incomplete comparison"},
		{spec: `foo; os_name = "x"`, wantErr: `unexpected "="`},
		{spec: `foo; os_name == "x" ; id`, wantErr: `unexpected ";"`},
		{spec: strings.Repeat("a", 600), wantErr: "longer than 500 bytes"},
		// 478 bytes as given, 568 once the marker is re-spaced.
		{spec: "a;" + strings.Repeat(`os_name=="x"and `, 29) + `os_name=="x"`, wantErr: "longer than 500 bytes once normalized"},
		{spec: "foo\nbar", wantErr: "control characters and newlines are not allowed"},
		{spec: "foo\x00", wantErr: "control characters and newlines are not allowed"},
		{spec: "foo\t==1", wantErr: "control characters and newlines are not allowed"},
		{spec: "f\u00f6o", wantErr: "only ASCII characters are allowed"},
		{spec: "./local", policy: allowURLs, wantErr: "bare URLs and local paths are not allowed"},
		{spec: "https://x/y.whl", policy: allowURLs, wantErr: "bare URLs and local paths are not allowed"},
		{spec: "pkg @ ftp://x/y.whl", policy: allowURLs, wantErr: `URL scheme "ftp" is not allowed`},
		{spec: "pkg @ git+ssh://git@x/y", policy: allowURLs, wantErr: "not allowed"},
		{spec: "pkg @ y.whl", policy: allowURLs, wantErr: `URL scheme "" is not allowed`},
		{spec: "pkg @ https://u:p@x/y.whl", policy: allowURLs, wantErr: "credentials in URLs are not allowed"},
		{spec: "pkg @ https:///y.whl", policy: allowURLs, wantErr: "URL needs a host"},
		{spec: "pkg @ file:y.whl", policy: allowURLs, wantErr: "file URL needs an absolute path"},
		{spec: "pkg @ https://x/a b", policy: allowURLs, wantErr: `character ' ' is not allowed in a URL`},
		{spec: "pkg @ https://x/a?b=1", policy: allowURLs, wantErr: "shell metacharacters are not allowed"},
		{spec: "pkg @ https://x/$(id)", policy: allowURLs, wantErr: "shell metacharacters are not allowed"},
		{spec: "pkg @ https://x/a(b)", policy: allowURLs, wantErr: `character '(' is not allowed in a URL`},
		{spec: "pkg @", policy: allowURLs, wantErr: "missing URL after @"},
		{spec: "pkg @ https://x/%zz", policy: allowURLs, wantErr: "invalid URL"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			got, err := Parse(tt.spec, tt.policy)
			if err == nil {
				t.Fatalf("Parse(%q) = %q, want error containing %q", tt.spec, got.String(), tt.wantErr)
			}
			if !errors.Is(err, ErrBad) {
				t.Errorf("errors.Is(%v, ErrBad) = false, want true", err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error = %q, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestParseRequirementErrorNamesSpec(t *testing.T) {
	long := strings.Repeat("a", 600)
	tests := []struct {
		spec string
		want string
	}{
		{spec: "foo|bar", want: `"foo|bar": `},
		{spec: "foo\nbar", want: `"foo\nbar": `},
		{spec: long, want: fmt.Sprintf("%q: ", long[:60]+"...")},
	}
	for _, tt := range tests {
		_, err := Parse(tt.spec, Policy{})
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("Parse(%q) error = %v, want prefix %q", tt.spec, err, tt.want)
		}
	}
}

func TestParseRequirements(t *testing.T) {
	got, err := ParseAll([]string{
		"requests>=2", "Numpy<2, >=1.24", "numpy >=1.24,<2", "Requests >= 2", "numpy==1.26.4", "attrs",
	}, Policy{})
	if err != nil {
		t.Fatal(err)
	}
	var gotStr []string
	for _, r := range got {
		gotStr = append(gotStr, r.String())
	}
	want := []string{"attrs", "numpy==1.26.4", "numpy>=1.24,<2", "requests>=2"}
	if diff := cmp.Diff(want, gotStr); diff != "" {
		t.Errorf("ParseAll mismatch (-want +got):\n%s", diff)
	}
}

func TestParseRequirementsReportsEveryError(t *testing.T) {
	_, err := ParseAll([]string{"ok", "-e .", "good>=1", "$(id)", "x.whl"}, Policy{})
	if !errors.Is(err, ErrBad) {
		t.Fatalf("error = %v, want ErrBad", err)
	}
	for _, want := range []string{`"-e .": pip options`, `"$(id)": shell metacharacters`, `"x.whl": URLs and local paths`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error = %q, want it to contain %q", err, want)
		}
	}
	for _, good := range []string{`"ok"`, `"good>=1"`} {
		if strings.Contains(err.Error(), good) {
			t.Errorf("error = %q, want no mention of valid spec %s", err, good)
		}
	}
}

func TestParseRequirementsListSize(t *testing.T) {
	many := make([]string, 101)
	for i := range many {
		many[i] = fmt.Sprintf("pkg%d", i)
	}
	tests := []struct {
		name    string
		specs   []string
		wantErr string
	}{
		{name: "nil", specs: nil, wantErr: "no packages given"},
		{name: "empty", specs: []string{}, wantErr: "no packages given"},
		{name: "101", specs: many, wantErr: "101 packages given, at most 100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseAll(tt.specs, Policy{})
			if !errors.Is(err, ErrBad) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error = %v, want ErrBad containing %q", err, tt.wantErr)
			}
		})
	}
	got, err := ParseAll(many[:100], Policy{})
	if err != nil || len(got) != 100 {
		t.Errorf("ParseAll(100 specs) = %d requirements, %v; want 100, nil", len(got), err)
	}
}

func FuzzParseRequirement(f *testing.F) {
	for _, s := range []string{
		"requests", "numpy>=1.24,<2", "pkg[extra1,Extra2]==1.0.post1", "name (>=1.0)",
		`foo; python_version<"3.12"`, `foo ; sys_platform == 'linux' and python_version >= "3.8"`,
		"zope.interface~=5.4", "pkg===1.0-weird", "pkg @ https://x/y.whl ; os_name=='nt'",
		"--index-url=x", "requests; rm -rf /", "$(id)", "foo>=1.0.*", "foo==1.*",
		"a;" + strings.Repeat(`os_name=="x"and `, 29) + `os_name=="x"`,
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, spec string, allow bool) {
		p := Policy{AllowURLs: allow}
		r, err := Parse(spec, p)
		if err != nil {
			if !errors.Is(err, ErrBad) {
				t.Fatalf("error %v does not wrap ErrBad", err)
			}
			return
		}
		canon := r.String()
		if strings.HasPrefix(canon, "-") {
			t.Fatalf("canonical form %q starts with -", canon)
		}
		if err := checkCanonicalShell(canon); err != nil {
			t.Fatalf("canonical form %q of %q: %v", canon, spec, err)
		}
		again, err := Parse(canon, p)
		if err != nil {
			t.Fatalf("canonical form %q of %q does not re-parse: %v", canon, spec, err)
		}
		want := r
		want.Name = r.Key // the canonical form spells the name normalized
		if diff := cmp.Diff(want, again); diff != "" {
			t.Fatalf("re-parse of %q from %q differs (-want +got):\n%s", canon, spec, diff)
		}
	})
}

// checkCanonicalShell reports shell metacharacters outside marker quotes in
// a canonical form: '<' and '>' are operators, '!' may only start "!=",
// '*' may only end ".*".
func checkCanonicalShell(s string) error {
	inQuote := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			inQuote = !inQuote
		case inQuote:
		case strings.IndexByte("`$|&\\?'\n\t", c) >= 0,
			c == '!' && (i+1 == len(s) || s[i+1] != '='),
			c == '*' && (i == 0 || s[i-1] != '.'):
			return fmt.Errorf("shell metacharacter %q at %d", c, i)
		}
	}
	if inQuote {
		return errors.New("unbalanced quote")
	}
	return nil
}
