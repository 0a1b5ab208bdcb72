package app

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ParentDirsVar is what a pybox tells the command servers it starts (code
// mode): its code storage and state dir. A pybox started that way (a
// second pybox listed as a downstream server) gets no other PYBOX_*
// setting and no CODE_STORAGE_DIR of its parent, so its own defaults
// apply; notNested refuses those when they reach the parent's folders.
const ParentDirsVar = "PYBOX_PARENT_DIRS"

// ParentDirs is the value of ParentDirsVar for c's downstream servers.
func (c *Config) ParentDirs() map[string]string {
	return map[string]string{ParentDirsVar: realish(c.StorageDir) + string(os.PathListSeparator) + realish(c.StateDir)}
}

// notNested refuses, in a pybox started as another's downstream server,
// a code storage or state dir that contains, or is inside, one of the
// parent's (listed in parent): with the defaults both would share one
// folder, and a tenant's program could reach every tenant's files through
// it, or the servers file there would start pybox after pybox.
func (c *Config) notNested(parent string) error {
	if parent == "" {
		return nil
	}
	for _, p := range filepath.SplitList(parent) {
		for _, own := range []struct{ name, dir string }{{"CODE_STORAGE_DIR", c.StorageDir}, {"PYBOX_STATE_DIR", c.StateDir}} {
			d := realish(own.dir)
			if p != "" && (within(d, p) || within(p, d)) {
				return fmt.Errorf("this pybox was started as a downstream MCP server of another pybox (%s), and its %s %s would share that pybox's folder %s: "+
					"give it its own CODE_STORAGE_DIR and PYBOX_STATE_DIR, outside the other pybox's, in the \"env\" of its entry in the servers file",
					ParentDirsVar, own.name, own.dir, p)
			}
		}
	}
	return nil
}

// InternalVar reports whether name is a variable pybox sets itself.
func InternalVar(name string) bool { return strings.EqualFold(name, ParentDirsVar) }
