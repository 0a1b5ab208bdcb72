package images

import "testing"

func TestTmpDigestPrint(t *testing.T) {
	for _, v := range []string{"base", "datascience"} {
		t.Logf("%s %s %q", v, digest(v, modeOffline), recipe(v, modeOffline))
	}
}
