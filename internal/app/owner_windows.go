package app

// chownsForSandbox: Docker Desktop's file sharing maps the ownership of a
// Windows folder; pybox never changes it (Windows files have no uid).
const chownsForSandbox = false

// fileOwner: Windows files have no uid and gid.
func fileOwner(string) (uid, gid int, ok bool) { return 0, 0, false }
