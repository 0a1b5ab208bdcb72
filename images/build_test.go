package images

import (
	"regexp"
	"slices"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

func TestParseVariant(t *testing.T) {
	tests := []struct {
		in, want string
		wantErr  bool
	}{
		{"", "base", false},
		{"base", "base", false},
		{"datascience", "datascience", false},
		{"Base", "", true},
		{"gpu", "", true},
		{" base", "", true},
	}
	for _, tt := range tests {
		got, err := ParseVariant(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseVariant(%q) = %q, %v; want %q, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestTag(t *testing.T) {
	for in, want := range map[string]string{
		"": "pybox-runtime:base", "base": "pybox-runtime:base", "datascience": "pybox-runtime:datascience",
	} {
		if got := Tag(in); got != want {
			t.Errorf("Tag(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDigest(t *testing.T) {
	hex64 := regexp.MustCompile(`^[0-9a-f]{64}$`)
	seen := map[string]string{}
	for _, v := range []string{VariantBase, VariantDatascience} {
		for _, m := range []string{modeOnline, modeOffline} {
			d := digest(v, m)
			if !hex64.MatchString(d) {
				t.Errorf("digest(%s, %s) = %q, want 64 hex digits", v, m, d)
			}
			if d != digest(v, m) {
				t.Errorf("digest(%s, %s) is not stable", v, m)
			}
			if prev, dup := seen[d]; dup {
				t.Errorf("digest(%s, %s) equals the digest of %s", v, m, prev)
			}
			seen[d] = v + "/" + m
		}
	}
}

func TestRuntimeLabels(t *testing.T) {
	rb := runtimeBuild{variant: "datascience", mode: modeOffline, base: "pybox-rootfs:bookworm-datascience", installer: "pip"}
	now := time.Date(2025, 3, 4, 5, 6, 7, 0, time.FixedZone("x", 3600))
	got := runtimeLabels(rb, "sha256:abc", now)
	want := map[string]string{
		LabelDigest:                       digest("datascience", modeOffline),
		LabelVariant:                      "datascience",
		LabelInstaller:                    "pip",
		LabelMode:                         modeOffline,
		ocispec.AnnotationCreated:         "2025-03-04T04:06:07Z",
		ocispec.AnnotationTitle:           "pybox runtime",
		ocispec.AnnotationVersion:         "datascience",
		ocispec.AnnotationBaseImageName:   "pybox-rootfs:bookworm-datascience",
		ocispec.AnnotationBaseImageDigest: "sha256:abc",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("label %s = %q, want %q", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d labels, want %d: %v", len(got), len(want), got)
	}
}

func TestDebootstrapArgs(t *testing.T) {
	got := debootstrapArgs("/d", "http://m")
	want := []string{"--variant=minbase", "--include=python3,python3-venv,python3-pip", "bookworm", "/d", "http://m"}
	if !slices.Equal(got, want) {
		t.Errorf("args = %q, want %q (the datascience packages come later, from apt)", got, want)
	}
}
