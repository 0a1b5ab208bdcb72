package images

import (
	"fmt"
	"path"
	"strings"

	"github.com/docker/docker/api/types/container"
)

// maxNamedChanges bounds how many refused paths an error lists.
const maxNamedChanges = 10

// roots are the directories an install may change below: site-packages
// (purelib, platlib), the scripts directory and the data directories
// share/, include/ and etc/ of the installation (where wheels' .data
// files go).
func (d packageDirs) roots() []string {
	return []string{d.Purelib, d.Platlib, d.Scripts, d.Data + "/share", d.Data + "/include", d.Data + "/etc"}
}

// allows reports whether an install may make change c. Allowed are:
//   - any change strictly inside a root, and a root itself changed or
//     added, except the interpreter in the scripts directory (its entries
//     named python*) and conda's activation hooks and settings (etc/conda/),
//     which run before the interpreter in every later `conda run`;
//   - a directory above a root marked modified: the copy-up of any change
//     below it marks every directory on the way (whose own metadata only
//     its owner, root in a prepared image, could change).
//
// Anything else (a file in /etc, pyvenv.cfg, bin/python, the standard
// library beside site-packages, a new file in the venv itself) is refused.
func (d packageDirs) allows(c container.FilesystemChange) bool {
	p := c.Path
	if !path.IsAbs(p) || path.Clean(p) != p {
		return false
	}
	if within(p, d.Data+"/etc/conda") || d.isInterpreter(p) {
		return false
	}
	for _, root := range d.roots() {
		switch {
		case p == root && c.Kind != container.ChangeDelete, strings.HasPrefix(p, root+"/"):
			return true
		case c.Kind == container.ChangeModify && (p == "/" || strings.HasPrefix(root, p+"/")):
			return true
		}
	}
	return false
}

// isInterpreter reports whether p is, or is below, an entry of the scripts
// directory named python*.
func (d packageDirs) isInterpreter(p string) bool {
	rest, ok := strings.CutPrefix(p, d.Scripts+"/")
	return ok && strings.HasPrefix(rest, "python")
}

// within reports whether p is dir or below it.
func within(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// refusedChanges returns, described, the changes an install may not make.
func (d packageDirs) refusedChanges(changes []container.FilesystemChange) []string {
	var out []string
	for _, c := range changes {
		if !d.allows(c) {
			out = append(out, c.Path+" ("+changeWord(c.Kind)+")")
		}
	}
	return out
}

func changeWord(k container.ChangeType) string {
	switch k {
	case container.ChangeAdd:
		return "added"
	case container.ChangeDelete:
		return "deleted"
	}
	return "changed"
}

// outsideError explains a refusal of changes outside the package directories.
func (d packageDirs) outsideError(refused []string) error {
	named := refused[:min(len(refused), maxNamedChanges)]
	more := ""
	if n := len(refused) - len(named); n > 0 {
		more = fmt.Sprintf(" and %d more", n)
	}
	sitePackages := d.Purelib
	if d.Platlib != d.Purelib {
		sitePackages += ", " + d.Platlib
	}
	return fmt.Errorf("%w: the install changed files outside the environment's package directories "+
		"(%s, the scripts in %s except python*, and %s/{share,include,etc}): %s%s; nothing was committed",
		ErrInstallFailed, sitePackages, d.Scripts, d.Data, strings.Join(named, ", "), more)
}
