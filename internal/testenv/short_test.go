package testenv

import (
	"slices"
	"testing"
)

func TestRequireVarsListsEverySetRequirement(t *testing.T) {
	t.Setenv("PYBOX_REQUIRE_DOCKER", "1")
	t.Setenv("PYBOX_REQUIRE_K8S", "yes")
	t.Setenv("PYBOX_REQUIRE_PODMAN", "")
	got := requireVars()
	for _, want := range []string{"PYBOX_REQUIRE_DOCKER", "PYBOX_REQUIRE_K8S"} {
		if !slices.Contains(got, want) {
			t.Errorf("requireVars() = %v, want it to contain %s", got, want)
		}
	}
	if slices.Contains(got, "PYBOX_REQUIRE_PODMAN") {
		t.Errorf("requireVars() = %v lists an empty PYBOX_REQUIRE_PODMAN", got)
	}
}
