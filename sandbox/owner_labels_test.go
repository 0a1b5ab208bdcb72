package sandbox

import (
	"testing"

	"github.com/pybox-dev/pybox/internal/contract"
)

// TestOwnerLabelsSetEveryInstanceLabel: every container pybox creates sets
// each label that ties it to an instance, empty when it has none (no lease
// folder, no uid of its own), so that one inherited from its image (a
// package layer, a user's image) never stands for it.
func TestOwnerLabelsSetEveryInstanceLabel(t *testing.T) {
	for _, o := range []Owner{{ID: "a", Host: "h", PID: 1}, {ID: "b", Host: "h", PID: 2, Lease: "/s/owners/b.lock"}} {
		l := o.Labels("run")
		for _, k := range contract.InstanceLabels {
			if _, ok := l[k]; !ok {
				t.Errorf("owner %+v: labels %v lack %s", o, l, k)
			}
		}
		if l[LabelLease] != o.Lease {
			t.Errorf("owner %+v: lease label %q", o, l[LabelLease])
		}
	}
}
