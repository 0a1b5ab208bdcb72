package engine_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"

	"github.com/pybox-dev/pybox/images"
	"github.com/pybox-dev/pybox/internal/engine"
)

// TestChangesListsWhatTheContainerWrote: the changes of an exited
// container are its writes, with the directories above them as modified,
// and nothing under a tmpfs mount. (No init process: its mount point,
// /sbin/docker-init, would be a change too.)
func TestChangesListsWhatTheContainerWrote(t *testing.T) {
	eng, img := setup(t)
	sp := noInit(spec(t, img, images.VenvPython, "-c",
		"import os; os.makedirs('/home/pybox/a/b'); open('/home/pybox/a/b/f', 'w').close(); open('/tmp/scratch', 'w').close()"))
	sp.Host.Tmpfs = map[string]string{"/tmp": "rw,size=1m,mode=1777"}
	var got []container.FilesystemChange
	sp.OnExit = func(ctx context.Context, id string, exit engine.Exit) error {
		var err error
		got, err = eng.Changes(ctx, id)
		return err
	}
	if exit, err := eng.Run(t.Context(), sp); err != nil || exit.Code != 0 {
		t.Fatalf("Run: exit %+v err %v", exit, err)
	}
	want := []container.FilesystemChange{
		{Kind: container.ChangeModify, Path: "/home"},
		{Kind: container.ChangeModify, Path: "/home/pybox"},
		{Kind: container.ChangeAdd, Path: "/home/pybox/a"},
		{Kind: container.ChangeAdd, Path: "/home/pybox/a/b"},
		{Kind: container.ChangeAdd, Path: "/home/pybox/a/b/f"},
	}
	slices.SortFunc(got, func(a, b container.FilesystemChange) int { return strings.Compare(a.Path, b.Path) })
	if !slices.Equal(got, want) {
		t.Errorf("changes:\n got %v\nwant %v", got, want)
	}
}
