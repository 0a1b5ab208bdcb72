package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/go-units"
)

func TestPodmanTmpfs(t *testing.T) {
	for in, want := range map[string]string{
		"rw,nosuid,nodev,size=1024,nr_inodes=100,uid=10001,gid=10001,mode=0700": "rw,nosuid,nodev,size=1024,mode=0700,U",
		"rw,nosuid,nodev,size=1024,mode=1777":                                   "rw,nosuid,nodev,size=1024,mode=1777",
	} {
		if got := podmanTmpfs(in); got != want {
			t.Errorf("podmanTmpfs(%q) = %q; want %q", in, got, want)
		}
	}
}

// TestAdapt: Docker's requests go unchanged; Podman's get explicit
// process and open-file limits (keeping those given) and the tmpfs options
// it knows; rootless Podman keeps the caller's uid, and on cgroup v1, where
// it would drop the limits, the request is refused.
func TestAdapt(t *testing.T) {
	host := func() *container.HostConfig {
		return &container.HostConfig{
			Tmpfs:     map[string]string{"/workspace": "rw,size=1,uid=1,gid=1"},
			Resources: container.Resources{Memory: 1 << 20, Ulimits: []*units.Ulimit{{Name: "nofile", Soft: 1024, Hard: 1024}}},
		}
	}
	ctx := context.Background()
	docker := &Client{kind: flavor{known: true}}
	h := host()
	if err := docker.adapt(ctx, h); err != nil || len(h.Ulimits) != 1 || h.Tmpfs["/workspace"] != "rw,size=1,uid=1,gid=1" || h.UsernsMode != "" {
		t.Errorf("Docker: %v %+v", err, h)
	}
	podman := &Client{kind: flavor{known: true, podman: true}}
	h = host()
	if err := podman.adapt(ctx, h); err != nil || len(h.Ulimits) != 2 || h.Ulimits[0].Hard != 1024 || h.Ulimits[1].Name != "nproc" || h.Ulimits[1].Hard < 1 ||
		h.Tmpfs["/workspace"] != "rw,size=1,U" || h.UsernsMode != "" {
		t.Errorf("rootful Podman: %v %+v %v", err, h, h.Ulimits)
	}
	rootless := &Client{kind: flavor{known: true, podman: true, rootless: true}}
	h = host()
	if err := rootless.adapt(ctx, h); err != nil || h.UsernsMode != "keep-id" {
		t.Errorf("rootless Podman: %v %+v", err, h)
	}
	v1 := &Client{kind: flavor{known: true, podman: true, rootless: true, cgroupV1: true}}
	if err := v1.adapt(ctx, host()); !errors.Is(err, ErrLimitsUnenforced) {
		t.Errorf("rootless Podman on cgroup v1: %v; want ErrLimitsUnenforced", err)
	}
}
