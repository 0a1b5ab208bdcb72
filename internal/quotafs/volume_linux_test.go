//go:build linux

package quotafs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/pybox-dev/pybox/internal/storage"
)

const mib = 1 << 20

// spec is a volume of quota MiB under a fresh folder, with two folders
// bound: code and sessions.
func spec(t testing.TB, root string, quota int64) Spec {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv("PYBOX_REQUIRE_QUOTAFS") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	for _, d := range []string{filepath.Dir(root), root} { // reachable by the unprivileged writer
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return Spec{Dir: filepath.Join(root, "state", "quota"), Bytes: quota * mib, Files: 1000,
		Binds: []Bind{{Name: "code", Target: filepath.Join(root, "code")}, {Name: "sessions", Target: filepath.Join(root, "state", "sessions")}}}
}

// open opens s and checks, at cleanup, that nothing of it stays mounted
// or attached.
func open(t testing.TB, s Spec) *Volume {
	t.Helper()
	v, err := Open(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := v.Close(); err != nil {
			t.Error(err)
		}
		checkGone(t, v)
	})
	return v
}

// checkGone fails when a mount under v's folders or a loop device on its
// image is left.
func checkGone(t testing.TB, v *Volume) {
	t.Helper()
	mounts, err := readMounts()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range append([]string{v.mnt}, targets(v.spec)...) {
		if _, ok := mounts[p]; ok {
			t.Errorf("%s is still mounted", p)
		}
	}
	if out, _ := exec.Command(tool("losetup"), "-j", v.image).Output(); len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("a loop device is still attached to the image: %s", out)
	}
}

func targets(s Spec) []string {
	var out []string
	for _, b := range s.Binds {
		out = append(out, b.Target)
	}
	return out
}

// fill writes as an unprivileged user (as programs do; as root with
// asRoot, as gVisor's gofer and the server do) into dir until the
// filesystem refuses, and returns dd's error.
func fill(t *testing.T, dir, name string, mb int, asRoot bool) error {
	t.Helper()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("dd", "if=/dev/zero", "of="+filepath.Join(dir, name), "bs=1M", "count="+strconv.Itoa(mb))
	if !asRoot {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	out, err := cmd.CombinedOutput()
	if err != nil && !strings.Contains(string(out), "No space left") {
		t.Fatalf("dd: %v: %s", err, out)
	}
	return err
}

// A writer cannot pass the quota and the headroom, not even root: the
// kernel refuses at write time; what the owner holds is what a statfs
// says.
func TestVolumeRefusesWritesPastTheQuota(t *testing.T) {
	s := spec(t, t.TempDir(), 16)
	v := open(t, s)
	if err := fill(t, s.Binds[0].Target, "big", 64, false); err == nil {
		t.Fatal("64 MiB written into a 16 MiB quota")
	}
	if err := fill(t, s.Binds[0].Target, "root", 64, true); err == nil {
		t.Fatal("root wrote 64 MiB more")
	}
	u, err := v.Usage()
	if err != nil {
		t.Fatal(err)
	}
	walked, err := storage.Measure(s.Binds[0].Target, storage.Usage{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("statfs: %d KiB in %d entries; walk: %d KiB in %d entries", u.Bytes>>10, u.Files, walked.Bytes>>10, walked.Files)
	if u.Bytes > s.Bytes+Headroom+64<<10 || walked.Bytes > s.Bytes+Headroom || u.Bytes < s.Bytes {
		t.Fatalf("the owner holds %d KiB (walked: %d KiB); want the quota of %d KiB plus at most the headroom", u.Bytes>>10, walked.Bytes>>10, s.Bytes>>10)
	}
	if u.Files != walked.Files {
		t.Errorf("statfs counts %d entries, the walk %d", u.Files, walked.Files)
	}
}
