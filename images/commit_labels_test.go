package images

import (
	"strings"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/internal/contract"
)

// TestCommitClearsInstanceLabels: a package layer keeps none of the labels
// that tie the install container to the server that made it (its owner,
// lease file, host, pid, role and uid; contract.InstanceLabels, which every
// container's labels set: sandbox's TestOwnerLabelsSetEveryInstanceLabel).
// A layer used to keep the installing server's lease path and uid: a
// container started from it by a server that sets no lease carried the
// other server's, whose lease then looked in use.
func TestCommitClearsInstanceLabels(t *testing.T) {
	lines := commitChanges(Environment{Type: EnvVenvUV}, layer{specs: []string{"a"}, all: []string{"a"}}, "", time.Unix(0, 0))
	set := map[string]string{}
	for _, l := range lines {
		if kv, ok := strings.CutPrefix(l, "LABEL "); ok {
			k, v, _ := strings.Cut(kv, "=")
			set[k] = v
		}
	}
	for _, k := range append([]string{contract.LabelLease, contract.LabelUID}, contract.InstanceLabels...) {
		want := `""`
		if k == contract.LabelRole {
			want = `"package-layer"`
		}
		if got, ok := set[k]; !ok || got != want {
			t.Errorf("the commit sets %s to %s (set: %v); want %s", k, got, ok, want)
		}
	}
}
