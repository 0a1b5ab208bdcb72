package images

import (
	"bytes"
	"compress/zlib"
	_ "embed"
	"fmt"
	"io"
	"strconv"
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
// request arrives), then a short bootstrap that reads the runner itself
// from stdin (RunnerFrame, or CompiledRunner's frame), so it works in
// images pybox did not build (user images, conda) without mounting
// anything. The runner's own argument (once or kernel) follows. Whoever
// starts the container writes the frame first, then speaks to the runner.
//
// The runner is not in the argument (it was, 86 KB of base64): the daemon
// decodes, stores and re-encodes a container's command at each of its
// state changes, and Kubernetes keeps it in every pod object, so a large
// command costs each container ~15 ms of the daemons' CPU.
func RunnerArgs() []string {
	return []string{"-I", "-S", "-c", runnerBoot}
}

// runnerBoot waits up to the runner's GREET (60 s, or fewer as
// PYBOX_GREET says: see runner.py) for the first byte on stdin, as the
// runner itself would for pybox's greeting, and ends quietly when none
// comes or stdin closes; it reads one frame, "S<len>\n" and the runner's
// source, "s<len>\n" and the source of a runner asked to send back its
// code compiled (with its ready frame: see RunnerFrame), or "M<len>\n"
// and its compiled code (zlib of marshal), exactly those bytes (the rest
// of stdin is the runner's), and runs it. The runner finds the code and
// whether to send it in _pybox_boot.
const runnerBoot = `import os,select
def _pybox_runner():
 try:g=min(60.0,max(1.0,float(os.environ.get("PYBOX_GREET",60))))
 except ValueError:g=60.0
 if not select.select([0],[],[],g)[0]:os._exit(0)
 h=b""
 while h[-1:]!=b"\n":
  c=os.read(0,1)
  if not c or len(h)>12:os._exit(0)
  h+=c
 n=int(h[1:]);d=bytearray()
 while len(d)<n:
  c=os.read(0,n-len(d))
  if not c:os._exit(0)
  d+=c
 if h[:1]==b"M":
  import marshal,zlib
  return marshal.loads(zlib.decompress(d)),0
 return compile(bytes(d),"<pybox-runner>","exec"),h[:1]==b"s"
_pybox_boot=_pybox_runner()
exec(_pybox_boot[0])`

// runnerText is the runner's source: the worker half's definitions, then
// the supervisor, which runs main.
var runnerText = append(append(append(append(append([]byte{}, workerPy...), '\n'), forwardPy...), '\n'), supervisorPy...)

// runnerFrames are runnerText framed for runnerBoot: as is, and asking
// for the compiled code back.
var runnerFrames = [2][]byte{
	append([]byte("S"+strconv.Itoa(len(runnerText))+"\n"), runnerText...),
	append([]byte("s"+strconv.Itoa(len(runnerText))+"\n"), runnerText...),
}

// RunnerFrame is the runner's source framed for RunnerArgs' bootstrap: the
// container compiles it at its start (~10 ms of CPU). With sendBack, the
// runner sends that compiled code (zlib of marshal) as its ready frame's
// payload, before any program reached its container, for CompiledFrame:
// the next containers of the same image and interpreter start from it.
// Callers must not modify the frame.
func RunnerFrame(sendBack bool) []byte {
	if sendBack {
		return runnerFrames[1]
	}
	return runnerFrames[0]
}

// maxCompiled bounds the compiled runner, compressed and not (it is ~45
// KB compressed, ~150 KB not).
const maxCompiled = 4 << 20

// CompiledFrame frames z, the runner compiled by an image's interpreter
// (zlib of marshal: a runner's ready frame asked with RunnerFrame(true)),
// for RunnerArgs' bootstrap in containers of that image and interpreter
// (only there: marshal's format is the interpreter version's), after
// checking that it is zlib of a bounded size. The compiled code is as
// trusted as the image's interpreter, which runs the runner anyway: the
// runner that sent it had been sent to a container nobody else had
// spoken to, and sent it before any program reached it.
func CompiledFrame(z []byte) ([]byte, error) {
	var err error
	if len(z) > maxCompiled {
		err = fmt.Errorf("%d bytes, more than %d", len(z), maxCompiled)
	}
	if err == nil {
		var r io.ReadCloser
		if r, err = zlib.NewReader(bytes.NewReader(z)); err == nil {
			var n int64
			n, err = io.Copy(io.Discard, io.LimitReader(r, maxCompiled+1))
			r.Close()
			if err == nil && n > maxCompiled {
				err = fmt.Errorf("more than %d bytes uncompressed", maxCompiled)
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("the compiled runner is not valid: %w", err)
	}
	return append([]byte("M"+strconv.Itoa(len(z))+"\n"), z...), nil
}
