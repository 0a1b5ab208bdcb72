package images

import (
	_ "embed"
	"encoding/base64"
)

// The in-image runner: the worker half's definitions, then the supervisor,
// which runs main (see the files' doc strings).
var (
	//go:embed runner/worker.py
	workerPy []byte
	//go:embed runner/runner.py
	supervisorPy []byte
	//go:embed runner/forward.py
	forwardPy []byte
)

// RunnerArgs is the argv tail that starts the in-image runner with any
// Python: isolated and without site (-I -S: nothing is imported from the
// working directory, PYTHON* variables or site-packages before a program's
// request arrives), then a one-line bootstrap carrying the runner itself,
// so it works in images pybox did not build (user images, conda) without
// mounting anything. The runner's own argument (once or kernel) follows.
func RunnerArgs() []string {
	return []string{"-I", "-S", "-c", runnerBootstrap}
}

var runnerBootstrap = "import base64;exec(compile(base64.b64decode('" +
	base64.StdEncoding.EncodeToString(append(append(append(append(append([]byte{}, workerPy...), '\n'), forwardPy...), '\n'), supervisorPy...)) +
	"').decode(),'<pybox-runner>','exec'))"
