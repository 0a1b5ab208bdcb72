package testenv

import "testing"

// HostileSdistName is the distribution WriteHostileSdist writes.
const HostileSdistName = "pyboxevilsdist"

// hostileBackend is a PEP 517 build backend that attacks from inside the
// build, where a setup.py runs: it writes /etc/pybox-pwned, a file in the
// environment's own prefix (PREFIX/pybox-pwned) and a .pth into
// site-packages, and bakes into the wheel it builds what it saw: the uid it
// ran as, its effective capabilities, no-new-privileges, the filesystem of
// /tmp, and what each write did.
const hostileBackend = `import base64, hashlib, os, sys, sysconfig, zipfile

def _try(path):
    try:
        with open(path, "w") as f:
            f.write("import sys\n")
        return "written"
    except OSError as e:
        return "denied: " + type(e).__name__

def _status(key):
    with open("/proc/self/status") as f:
        return [l.split()[1] for l in f if l.startswith(key + ":")][0]

def _tmpfs():
    with open("/proc/self/mounts") as f:
        return [l.split()[2] for l in f if l.split()[1] == "/tmp"][-1:] or ["none"]

def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name, version = "pyboxevilsdist", "1.0"
    report = {"uid": os.getuid(), "caps": _status("CapEff"), "nnp": _status("NoNewPrivs"), "tmp": _tmpfs()[0],
              "etc": _try("/etc/pybox-pwned"), "prefix": _try(os.path.join(sys.prefix, "pybox-pwned")), "pth": _try(os.path.join(sysconfig.get_paths()["purelib"], "pybox-pwned.pth"))}
    files = {name + "/__init__.py": "REPORT = %r\n" % report,
             name + "-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version),
             name + "-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: evil\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record, whl = [], "%s-%s-py3-none-any.whl" % (name, version)
    with zipfile.ZipFile(os.path.join(wheel_directory, whl), "w") as z:
        for n, body in files.items():
            z.writestr(n, body)
            digest = base64.urlsafe_b64encode(hashlib.sha256(body.encode()).digest()).rstrip(b"=").decode()
            record.append("%s,sha256=%s,%d" % (n, digest, len(body)))
        record.append(name + "-1.0.dist-info/RECORD,,")
        z.writestr(name + "-1.0.dist-info/RECORD", "\n".join(record) + "\n")
    return whl
`

// HostileReport is Python that prints what the hostile sdist recorded at
// build time (uid, CapEff, NoNewPrivs, the filesystem of /tmp, what the
// writes to /etc and to the prefix did) and whether /etc/pybox-pwned and
// PREFIX/pybox-pwned are in the image.
const HostileReport = `import os, sys, pyboxevilsdist as p; r = p.REPORT; ` +
	`print(r["uid"], r["caps"], r["nnp"], r["tmp"], r["etc"], r["prefix"], os.path.exists("/etc/pybox-pwned"), ` +
	`os.path.exists(os.path.join(sys.prefix, "pybox-pwned")))`

// HostileReportUnprivileged is HostileReport's output when the build ran
// as the install user, hardened, in an environment it can write only the
// package directories of.
const HostileReportUnprivileged = "10002 0000000000000000 1 tmpfs denied: PermissionError denied: PermissionError False False\n"

// WriteHostileSdist writes the hostile source distribution
// HostileSdistName 1.0 into dir: building it writes /etc/pybox-pwned,
// PREFIX/pybox-pwned and a .pth into site-packages and records what the build saw (HostileReport
// prints it from an image that has the package).
func WriteHostileSdist(t testing.TB, dir string) string {
	t.Helper()
	return WriteSdist(t, dir, Sdist{Name: HostileSdistName, Version: "1.0", Backend: hostileBackend})
}
