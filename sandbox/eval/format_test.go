package eval

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

// TestPassAtK against values computed by hand from 1 - C(n-c,k)/C(n,k).
func TestPassAtK(t *testing.T) {
	for _, tc := range []struct {
		n, c, k int
		want    float64
	}{
		{5, 2, 1, 0.4},  // 1 - 3/5
		{5, 2, 2, 0.7},  // 1 - C(3,2)/C(5,2) = 1 - 3/10
		{5, 2, 3, 0.9},  // 1 - 1/10
		{5, 2, 4, 1},    // n-c < k
		{10, 0, 1, 0},   // nothing passed
		{10, 10, 10, 1}, // everything passed
		{200, 3, 100, 1 - (100.0*99*98)/(200.0*199*198)}, // 1 - C(197,100)/C(200,100)
		{1, 1, 1, 1},
		{1, 0, 1, 0},
	} {
		if got := PassAtK(tc.n, tc.c, tc.k); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("PassAtK(%d, %d, %d) = %v; want %v", tc.n, tc.c, tc.k, got, tc.want)
		}
	}
	got := PassAtKs(map[string]TaskCount{"a": {5, 2}, "b": {3, 3}}, []int{1, 2, 5})
	if len(got) != 2 || math.Abs(got[1]-0.7) > 1e-12 || math.Abs(got[2]-0.85) > 1e-12 {
		t.Errorf("PassAtKs = %v; want pass@1 0.7, pass@2 0.85 and no pass@5 (task b has 3 samples)", got)
	}
	if ks, err := ParseKs("10, 1,100,1"); err != nil || len(ks) != 3 || ks[0] != 1 || ks[2] != 100 {
		t.Errorf("ParseKs: %v %v", ks, err)
	}
	for _, bad := range []string{"", "0", "1,x", "10abc", "-1"} {
		if _, err := ParseKs(bad); err == nil {
			t.Errorf("ParseKs(%q) accepted", bad)
		}
	}
}

func TestCompare(t *testing.T) {
	for _, tc := range []struct {
		mode, got, want string
		match           bool
	}{
		{"exact", "1 2\n", "1 2\n", true},
		{"exact", "1 2", "1 2\n", false},
		{"exact", "1  2\n", "1 2\n", false},
		{"tokens", "1  2\r\n\n", "1 2\n", true},
		{"tokens", "1 2 3\n", "1 2\n", false},
		{"tokens", "1.0\n", "1\n", false},
		{"float", "1.0000001 x\n", "1 x\n", true},
		{"float", "1.001\n", "1\n", false},
		{"float:0.01", "1.001\n", "1\n", true},
		{"float:0.01", "1001000\n", "1000000\n", true}, // relative above 1
		{"float", "nan\n", "nan\n", true},              // the same token
		{"float", "nan\n", "1\n", false},
		{"float", "1 2\n", "1\n", false},
	} {
		c, err := ParseCompare(tc.mode)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Match(tc.got, tc.want); got != tc.match {
			t.Errorf("%s: Match(%q, %q) = %v", tc.mode, tc.got, tc.want, got)
		}
	}
	for _, bad := range []string{"fuzzy", "tokens:1", "float:x", "float:-1", "float:inf"} {
		if _, err := ParseCompare(bad); err == nil {
			t.Errorf("ParseCompare(%q) accepted", bad)
		}
	}
}

// TestProblemsMapping: the program each layout builds.
func TestProblemsMapping(t *testing.T) {
	problems := `{"task_id": "HumanEval/0", "prompt": "def f(x):\n", "entry_point": "f", "test": "def check(c):\n    assert c(1) == 2\n"}
{"task_id": 11, "text": "Write f.", "code": "def f(x): return x", "test_list": ["assert f(1) == 1", "assert f(2) == 2"], "test_setup_code": "import math"}
{"task_id": "io/1", "cases": [{"stdin": "1\n", "expected_stdout": "2\n"}]}
`
	probs, err := ReadProblems(strings.NewReader(problems))
	if err != nil {
		t.Fatal(err)
	}
	samples := `{"task_id": "HumanEval/0", "completion": "    return x + 1\n", "model": "m"}
{"task_id": 11, "completion": "def f(x): return x"}
{"task_id": "io/1", "completion": "print(int(input()) + 1)"}
`
	got, err := ReadCompletions(strings.NewReader(samples), probs, time.Minute, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	he, mbpp, io := got[0], got[1], got[2]
	if *he.Code+"\n"+strings.TrimPrefix(*he.Test, "\n") != "def f(x):\n    return x + 1\n\ndef check(c):\n    assert c(1) == 2\n\ncheck(f)\n" || he.Task != `"HumanEval/0"` {
		t.Errorf("HumanEval: code %q test %q task %s", *he.Code, *he.Test, he.Task)
	}
	if *mbpp.Code != "def f(x): return x" || *mbpp.Test != "import math\nassert f(1) == 1\nassert f(2) == 2\n" || mbpp.Task != "11" {
		t.Errorf("MBPP: code %q test %q task %s", *mbpp.Code, *mbpp.Test, mbpp.Task)
	}
	if io.Test != nil || len(io.Cases) != 1 || *io.Code != "print(int(input()) + 1)" {
		t.Errorf("cases: %+v", io)
	}
	for _, bad := range []string{
		`{"task_id": "nope", "completion": "x"}`,
		`{"task_id": "HumanEval/0"}`,
		`{"task_id": "HumanEval/0", "completion": 3}`,
	} {
		if _, err := ReadCompletions(strings.NewReader(bad), probs, time.Minute, 1<<20); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
	if _, err := ReadProblems(strings.NewReader(`{"task_id": "x", "prompt": "p"}`)); err == nil {
		t.Error("a problem of no layout was accepted")
	}
}

// TestHumanEvalFormat: a results line is the sample's line with result
// and passed; read back, it must be the same sample's.
func TestHumanEvalFormat(t *testing.T) {
	probs, _ := ReadProblems(strings.NewReader(`{"task_id": "T/0", "prompt": "", "entry_point": "f", "test": "def check(c): pass"}`))
	samples, err := ReadCompletions(strings.NewReader(`{"task_id": "T/0", "completion": "x = {'a': {}}", "extra": {"n": 1}}`+"\n"+`{"task_id": "T/0", "completion": "y"}`), probs, time.Minute, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	h := HumanEval{Samples: samples}
	for _, tc := range []struct {
		r    Result
		want string
	}{
		{Result{Passed: true}, "passed"},
		{Result{Error: ErrorTimeout}, "timed out"},
		{Result{Error: ErrorExit, ExitCode: 1, Exception: "AssertionError", Stderr: "Traceback (most recent call last):\n  x\nAssertionError\n"}, "failed: "},
		{Result{Error: ErrorExit, ExitCode: 1, Exception: "NameError", Stderr: "Traceback (most recent call last):\n  x\nNameError: name 'z' is not defined\n"}, "failed: name 'z' is not defined"},
		{Result{Error: ErrorExit, ExitCode: 3}, "failed: exit status 3"},
		{Result{Error: ErrorOOM, Message: "ran out of memory and was killed"}, "failed: ran out of memory and was killed"},
	} {
		line, err := h.Encode(samples[0], tc.r)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if m["result"] != tc.want || m["passed"] != tc.r.Passed || m["extra"] == nil || m["completion"] != "x = {'a': {}}" {
			t.Errorf("line %s; want result %q", line, tc.want)
		}
		key, back, err := h.Decode(0, line)
		if err != nil || key != samples[0].key || back.Passed != tc.r.Passed || (tc.want == "timed out") != (back.Error == ErrorTimeout) {
			t.Errorf("read back %s: %q %+v %v", line, key, back, err)
		}
		if _, _, err := h.Decode(1, line); err == nil {
			t.Errorf("the line of sample 0 was taken for sample 1's")
		}
	}
}
