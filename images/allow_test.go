package images

import "testing"

// TestNormalizeRefRefusesIDs: what the daemon could resolve as an image ID
// or a prefix of one is refused; a reference gets its full form.
func TestNormalizeRefRefusesIDs(t *testing.T) {
	for _, ref := range []string{"0", "0c", "ddbf6c", "sha256:ddbf6c", "deadbeef",
		"sha256:ddbf6cb017dacec8cfd1968811415bf676b99d512a47dd25368d0c4f58c45a58",
		"ddbf6cb017dacec8cfd1968811415bf676b99d512a47dd25368d0c4f58c45a58", "Upper:1", ""} {
		if got, err := NormalizeRef(ref); err == nil {
			t.Errorf("NormalizeRef(%q) = %q; want an error", ref, got)
		}
	}
	for ref, want := range map[string]string{
		"python:3.12-slim":                     "docker.io/library/python:3.12-slim",
		"pybox-env:0123":                       "docker.io/library/pybox-env:0123",
		"0c:latest":                            "docker.io/library/0c:latest",
		"registry.example:5000/team/img":       "registry.example:5000/team/img:latest",
		"docker.io/library/pybox-runtime:base": "docker.io/library/pybox-runtime:base",
	} {
		if got, err := NormalizeRef(ref); err != nil || got != want {
			t.Errorf("NormalizeRef(%q) = %q, %v; want %q", ref, got, err, want)
		}
	}
}

// TestAllowlist: pybox's runtime images are always allowed, listed ones
// in any spelling of the same reference, nothing else.
func TestAllowlist(t *testing.T) {
	a, err := newAllowlist([]string{"python:3.12-slim", "docker.io/team/img:2"})
	if err != nil {
		t.Fatal(err)
	}
	for ref, want := range map[string]bool{
		Tag(VariantBase): true, Tag(VariantDatascience): true, "docker.io/library/python:3.12-slim": true,
		"team/img:2": true, "team/img": false, "python:3.13-slim": false, "0c": false, "pybox-env:0123": false,
	} {
		if got := a.allows(ref); got != want {
			t.Errorf("allows(%q) = %v; want %v", ref, got, want)
		}
	}
	if _, err := newAllowlist([]string{"ddbf6c"}); err == nil {
		t.Error("an ID prefix in the list was accepted")
	}
}
