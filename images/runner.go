package images

import "encoding/base64"

// RunnerArgs is the argv tail that starts the in-image runner with any
// Python: a one-line bootstrap carrying the runner itself, so it works in
// images pybox did not build (user images, conda) without mounting
// anything, and survives launchers that mangle newlines (conda run).
// The runner's own arguments follow it.
func RunnerArgs() []string {
	return []string{"-c", runnerBootstrap}
}

var runnerBootstrap = "import base64;exec(compile(base64.b64decode('" +
	base64.StdEncoding.EncodeToString(runnerPy) + "').decode(),'<pybox-runner>','exec'))"
