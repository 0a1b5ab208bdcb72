package images

import (
	"fmt"
	"regexp"
	"strings"
)

// pipNoDistribution is pip's last word when nothing fits a requirement,
// which under --only-binary includes a package published only as an sdist.
var pipNoDistribution = regexp.MustCompile(`No matching distribution found for (\S+)`)

// sdistHint is what a failed wheels-only install adds to its error when
// the installer found no usable distribution: the way to allow building
// from source. Empty when sdists are allowed or the failure is another.
func (in *Installer) sdistHint(output string) string {
	if in.Index.AllowSdist {
		return ""
	}
	what := "a package"
	if m := pipNoDistribution.FindStringSubmatch(output); m != nil {
		what = m[1]
	} else if !strings.Contains(output, "no-build") && !strings.Contains(output, "no binary distribution") &&
		!strings.Contains(output, "building from source") {
		return ""
	}
	return fmt.Sprintf(": no wheel found for %s, and building source distributions is off; if it is published only "+
		"as an sdist, set PYBOX_ALLOW_SDIST=true (or use the permissive policy) to let installs build it, which runs "+
		"its build code as the unprivileged install user", what)
}
