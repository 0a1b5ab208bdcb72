"""pybox in-image runner, passed to the interpreter with -c.

Usage:
    runner run FILE [ARGS...]   run FILE as __main__, like `python FILE`.
    runner kernel NONCE         serve a stateful session over stdin/stdout.
    runner wait                 (warm pool) wait for one request on stdin,
                                then behave exactly like run mode.

In run mode it behaves like the plain interpreter (same exit status, same
traceback text, stdin untouched) and adds one thing: matplotlib figures left
open when the program ends are saved as PNG files into $PYBOX_OUTPUTS.

In kernel mode the globals of every program persist between requests. The
protocol uses private copies of fds 0 and 1; the program's fd 0 is
/dev/null and its fds 1 and 2 are pipes whose bytes are relayed as frames.
Before each request fds 1 and 2, sys.stdout and sys.stderr are put back, so
a program that closed or redirected them does not silence the next ones.

    request  (host -> kernel):  b"%d\\n" % len(body) + body, body = JSON
             {"nonce", "code", "filename", "stdin", "outputs"}
    response (kernel -> host):  b"PYBOX <nonce> <kind> <len>\\n" + payload
             kinds: ready (nonce is the one given at start), out, err,
             done (payload JSON {"code": exit status})
             out and err carry the nonce of the request being served when
             they were sent: what threads print after their program's done
             frame arrives with the next request, under the old nonce.

A frame that does not parse tells the host the session is corrupt; it then
discards the container. The backend is always headless (MPLBACKEND=Agg).

In wait mode the interpreter starts before there is a program (a warm
pool's container); the one request, framed like a kernel request with body
{"file", "stdin" (null = none), "outputs"}, says what to run, and the
program's stdin becomes that text (or /dev/null).
"""
import io
import json
import os
import runpy
import sys
import threading
import traceback
import types

os.environ["MPLBACKEND"] = "Agg"


def save_figures(outdir, max_figures):
    """Save every open matplotlib figure as outdir/figure-N.png, then close them."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None or not outdir:
        return
    try:
        nums = plt.get_fignums()
        if not nums:
            return
        os.makedirs(outdir, exist_ok=True)
        for n, num in enumerate(nums[:max_figures], start=1):
            fig = plt.figure(num)
            fig.savefig(os.path.join(outdir, "figure-%d.png" % n), format="png", dpi=100)
        plt.close("all")
    except Exception as e:  # figures are a bonus; never mask the program's own result
        quietly(lambda: print("pybox: could not save figures: %s" % e, file=sys.stderr))


def figures_from_env(outdir=None):
    save_figures(outdir if outdir is not None else os.environ.get("PYBOX_OUTPUTS", ""),
                 int(os.environ.get("PYBOX_MAX_FIGURES", "8")))


def quietly(call):
    """Call call(), ignoring the failure of a stream the program closed or
    replaced (stdout or stderr), as the interpreter does."""
    try:
        call()
    except Exception:
        pass


def user_traceback(e, filename):
    """Print e's traceback starting at the first frame of the user's code.
    A file that did not compile gets no traceback at all, as under python."""
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    if tb is None and not isinstance(e, SyntaxError):
        tb = e.__traceback__
    quietly(lambda: traceback.print_exception(type(e), e, tb))


def exit_status(e):
    """The process exit status SystemExit(e.code) stands for, printing a message if any."""
    code = e.code
    if code is None:
        return 0
    if isinstance(code, int):
        # CPython takes the code as a C long long (-1 when it does not fit)
        # and the OS keeps the low byte.
        return code & 0xFF if -(1 << 63) <= code < (1 << 63) else 255
    quietly(lambda: print(code, file=sys.stderr))
    return 1


def guarded(run, filename, outdir=None):
    """Call run() and return the exit status the interpreter would give:
    SystemExit's code, or 1 after printing the user's traceback. Open
    figures are saved either way."""
    try:
        run()
        return 0
    except SystemExit as e:
        return exit_status(e)
    except KeyboardInterrupt as e:
        user_traceback(e, filename)
        return 130  # python ends itself with SIGINT: 128 + 2
    except BaseException as e:
        user_traceback(e, filename)
        return 1
    finally:
        figures_from_env(outdir)


def run_file(path, args):
    if not os.path.isfile(path):
        print("python: can't open file %r: [Errno 2] No such file or directory" % path, file=sys.stderr)
        return 2
    sys.argv = [path] + args
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    return guarded(lambda: runpy.run_path(path, run_name="__main__"), path)


class Kernel:
    """A stateful session: one program at a time, globals kept between them."""

    def __init__(self, nonce):
        self.proto_in = os.fdopen(os.dup(0), "rb", buffering=0)
        self.proto_out = os.dup(1)
        self.lock = threading.Lock()
        self.nonce = nonce
        self.sync = b"\x00PYBOX-SYNC-" + os.urandom(8).hex().encode() + b"\x00"
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        self.pipes = {}  # fd -> the kernel's own copy of its pipe's write end
        self.relays = [self.relay(1, "out"), self.relay(2, "err")]
        self.streams = {1: sys.stdout, 2: sys.stderr}
        self.stream_args = {fd: dict(encoding=f.encoding, errors=f.errors, line_buffering=f.line_buffering)
                            for fd, f in self.streams.items()}
        main = types.ModuleType("__main__")
        sys.modules["__main__"] = main
        self.globals = main.__dict__
        self.globals["__builtins__"] = __builtins__

    def relay(self, fd, kind):
        """Point fd at a pipe and relay what is written to it as frames. The
        kernel keeps the pipe's write end, so it can point fd there again and
        send its sync marker whatever the program did to fd."""
        r, w = os.pipe()
        os.dup2(w, fd)
        self.pipes[fd] = w
        synced = threading.Event()
        threading.Thread(target=self.pump, args=(r, kind, synced), daemon=True).start()
        return synced

    def pump(self, r, kind, synced):
        pending = b""
        while True:
            chunk = os.read(r, 65536)
            if not chunk:
                return
            pending += chunk
            i = pending.find(self.sync)
            while i >= 0:
                self.send(kind, pending[:i])
                pending = pending[i + len(self.sync):]
                synced.set()
                i = pending.find(self.sync)
            hold = self.partial_sync(pending)
            self.send(kind, pending[:len(pending) - hold])
            pending = pending[len(pending) - hold:]

    def partial_sync(self, data):
        """Length of the longest tail of data that could start a sync marker."""
        for n in range(min(len(data), len(self.sync) - 1), 0, -1):
            if self.sync.startswith(data[-n:]):
                return n
        return 0

    def send(self, kind, payload, nonce=None):
        if not payload and kind in ("out", "err"):
            return
        head = b"PYBOX %s %s %d\n" % ((nonce or self.nonce).encode(), kind.encode(), len(payload))
        with self.lock:
            data = head + payload
            while data:
                data = data[os.write(self.proto_out, data):]

    def read_request(self):
        return read_frame(self.proto_in)

    def reset_streams(self):
        """Undo what the last program did to fds 1 and 2 and to sys.stdout
        and sys.stderr (closed, replaced, redirected)."""
        for fd, w in self.pipes.items():
            os.dup2(w, fd)
            if self.streams[fd].closed:
                raw = io.FileIO(fd, "w", closefd=False)
                self.streams[fd] = io.TextIOWrapper(raw, write_through=True, **self.stream_args[fd])
        sys.stdout = sys.__stdout__ = self.streams[1]
        sys.stderr = sys.__stderr__ = self.streams[2]

    def flush_output(self):
        """Make sure everything the program wrote reached the host."""
        for f in (sys.stdout, sys.stderr):
            try:
                f.flush()
            except Exception:
                pass
        for ev in self.relays:
            ev.clear()
        for fd, ev in zip((1, 2), self.relays):
            try:
                os.write(self.pipes[fd], self.sync)
            except OSError:  # the program closed the kernel's own fd
                ev.set()
        for ev in self.relays:
            ev.wait(10)

    def execute(self, req):
        filename = req.get("filename") or "<session>"
        self.reset_streams()
        data = (req.get("stdin") or "").encode("utf-8", "surrogateescape")
        sys.stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")  # with .buffer, like a real stdin
        os.environ["PYBOX_OUTPUTS"] = req.get("outputs") or ""
        sys.argv = [filename]
        run = lambda: exec(compile(req["code"], filename, "exec"), self.globals)
        return guarded(run, filename, req.get("outputs") or "")

    def serve(self):
        self.send("ready", b"", nonce=self.nonce)
        while True:
            req = self.read_request()
            if req is None:
                return 0
            self.nonce = req["nonce"]
            status = self.execute(req)
            self.flush_output()
            self.send("done", json.dumps({"code": status}).encode())


def read_frame(f):
    """Read one b"<len>\\n<body>" frame from the binary file f; None at EOF."""
    line = b""
    while not line.endswith(b"\n"):
        c = f.read(1)
        if not c:
            return None
        line += c
    n = int(line)
    body = b""
    while len(body) < n:
        c = f.read(n - len(body))
        if not c:
            return None
        body += c
    return json.loads(body)


def feed_stdin(text):
    """Make fd 0 (and sys.stdin) read text, or /dev/null when text is None."""
    if text is None:
        fd = os.open(os.devnull, os.O_RDONLY)
    else:
        fd, w = os.pipe()
        data = text.encode()

        def write():
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(w, view):]
            except OSError:
                pass  # the program stopped reading its input
            finally:
                os.close(w)
        threading.Thread(target=write, daemon=True).start()
    os.dup2(fd, 0)
    os.close(fd)
    sys.stdin = io.TextIOWrapper(os.fdopen(0, "rb", closefd=False), encoding="utf-8")


def wait_then_run():
    """Warm-pool mode: one request, then run mode."""
    req = read_frame(os.fdopen(os.dup(0), "rb", buffering=0))
    if req is None:
        return 0  # the pool discarded us unused
    feed_stdin(req.get("stdin"))
    os.environ["PYBOX_OUTPUTS"] = req.get("outputs") or ""
    return run_file(req["file"], [])


def main(argv):
    if len(argv) >= 2 and argv[0] == "run":
        return run_file(argv[1], argv[2:])
    if argv == ["wait"]:
        return wait_then_run()
    if len(argv) == 2 and argv[0] == "kernel":
        return Kernel(argv[1]).serve()
    print("usage: runner run FILE [ARGS...] | runner kernel NONCE | runner wait", file=sys.stderr)
    return 2


if __name__ == "__main__":
    rc = main(sys.argv[1:])
    for f in (sys.stdout, sys.stderr):
        quietly(lambda: f.flush())
    sys.exit(rc)
