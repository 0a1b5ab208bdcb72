package images

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
)

// dirsMarker starts the line in which the install container reports the
// environment's package directories.
const dirsMarker = "PYBOX-PACKAGE-DIRS "

// dirsWrapper starts every install. It runs in the environment's own
// interpreter with -I -S, so nothing from site-packages (where an earlier
// layer's packages live) runs before it: no .pth, no sitecustomize. It
// reports the interpreter's install paths as its first line of output,
// resolving the venv prefix itself (without site, sys.prefix is the base
// installation's), refuses when the install user cannot write
// site-packages (exit status 77: pip would fall back to a user install,
// which is lost), and otherwise executes the installer's argv, "{python}"
// standing for the interpreter, with the caches off and no bytecode for
// what is only imported (pip still compiles what it installs).
const dirsWrapper = `import json, os, sys, sysconfig
exe = os.path.abspath(sys.executable)
prefix = os.path.dirname(os.path.dirname(exe))
if any(os.path.isfile(os.path.join(d, "pyvenv.cfg")) for d in (os.path.dirname(exe), prefix)):
    scheme = "venv" if "venv" in sysconfig.get_scheme_names() else "posix_prefix"
    paths = sysconfig.get_paths(scheme, vars={"base": prefix, "platbase": prefix})
else:
    prefix, paths = sys.prefix, sysconfig.get_paths()
dirs = {k: os.path.realpath(paths[k]) for k in ("purelib", "platlib", "scripts", "data")}
dirs.update(uid=os.getuid(), prefix=os.path.realpath(prefix),
            unwritable=sorted({dirs[k] for k in ("purelib", "platlib") if not os.access(dirs[k], os.W_OK | os.X_OK)}))
print("` + dirsMarker + `" + json.dumps(dirs), flush=True)
if dirs["unwritable"]:
    sys.exit(77)
os.environ.update(PIP_NO_CACHE_DIR="1", UV_NO_CACHE="1", UV_PYTHON_DOWNLOADS="never", PYTHONDONTWRITEBYTECODE="1")
argv = [exe if a == "{python}" else a for a in sys.argv[1:]]
os.execvp(argv[0], argv)
`

// wrapperArgs are the interpreter arguments that run dirsWrapper and then
// argv. The script is passed as one line (conda run mangles newlines in
// arguments): an exec of its source as a string literal, which Go's
// quoting writes in a form Python reads the same for this ASCII text.
func wrapperArgs(argv []string) []string {
	return append([]string{"-I", "-S", "-c", "exec(" + strconv.Quote(dirsWrapper) + ")"}, argv...)
}

// packageDirs are where the environment's interpreter installs packages, as
// it reported them before the installer ran (real paths, symlinks resolved).
type packageDirs struct {
	UID        int      `json:"uid"`
	Prefix     string   `json:"prefix"`
	Purelib    string   `json:"purelib"`
	Platlib    string   `json:"platlib"`
	Scripts    string   `json:"scripts"`
	Data       string   `json:"data"`
	Unwritable []string `json:"unwritable"`
}

// parseDirs reads the wrapper's report from the first line of the install
// container's output.
func parseDirs(first string) (packageDirs, error) {
	var d packageDirs
	body, ok := strings.CutPrefix(first, dirsMarker)
	if !ok {
		return d, errors.New("the install container did not report the environment's package directories")
	}
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		return d, fmt.Errorf("the install container's report of package directories: %w", err)
	}
	for _, p := range []string{d.Purelib, d.Platlib, d.Scripts, d.Data} {
		if !path.IsAbs(p) || path.Clean(p) != p || p == "/" {
			return d, fmt.Errorf("the environment reports the package directory %q: not a directory an install may change", p)
		}
	}
	return d, nil
}

// unwritableError explains a refusal because the install user cannot write
// the environment's site-packages.
func (d packageDirs) unwritableError() error {
	return fmt.Errorf("%w: the environment's site-packages %s is not writable by the unprivileged install user %s "+
		"(installs never run as root): use the pybox runtime image, or build the image so that this user owns "+
		"site-packages, e.g. RUN chown -R %s %s (and, for packages with scripts, may add files to %s)",
		ErrInstallFailed, strings.Join(d.Unwritable, " and "), InstallUser, InstallUser, strings.Join(d.Unwritable, " "), d.Scripts)
}

// headWriter keeps the first line written to it (up to max bytes) and
// passes everything after it on to rest.
type headWriter struct {
	max  int
	line bytes.Buffer
	done bool
	rest io.Writer
}

func (w *headWriter) Write(p []byte) (int, error) {
	n := len(p)
	if !w.done {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			i = len(p)
		}
		take := min(i, w.max-w.line.Len())
		w.line.Write(p[:take])
		switch {
		case take < i: // longer than max: not a report; what follows goes on
			w.done, p = true, p[take:]
		case i < len(p):
			w.done, p = true, p[i+1:]
		default:
			p = nil
		}
	}
	if _, err := w.rest.Write(p); err != nil {
		return n, err
	}
	return n, nil
}

// first is the first line, once it is complete.
func (w *headWriter) first() string {
	if !w.done {
		return ""
	}
	return w.line.String()
}
