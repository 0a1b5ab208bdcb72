"""pybox runner, the worker half: runs the user's programs (see runner.py).

It is forked from the supervisor before any request. Until its request
arrives it imports only from the standard library (the interpreter runs
with -I -S); then it adds site-packages and, for a file, the file's folder
in front of sys.path, as `python FILE` would. A program that ends the
normal way ends the worker in `once` mode (exit status = the program's,
after non-daemon threads and atexit handlers, as under python); in `kernel`
mode the worker reports each program's status on its control pipe.
"""
import _signal as signal  # the module's functions without its enums (signal imports enum, ~2 ms per start)
import atexit
import binascii
import gc
import importlib.machinery
import io
import marshal
import os
import site
import sys
import types

os.environ["MPLBACKEND"] = "Agg"


class FullWriter(io.RawIOBase):
    """A raw stream on fd that writes everything it is given (a pipe may
    take a large write in parts, e.g. under gVisor)."""

    def __init__(self, fd):
        self.fd = fd

    def writable(self):
        return True

    def fileno(self):
        return self.fd

    def write(self, b):
        view = memoryview(b).cast("B")
        while view:
            view = view[os.write(self.fd, view):]
        return len(b)


def text_stream(fd, like):
    """An unbuffered text stream on fd, like python -u's."""
    return io.TextIOWrapper(FullWriter(fd), encoding=like.encoding, errors=like.errors, write_through=True)


def json_codec():
    """loads and dumps as the json package's (UTF-8 bytes or str in; ASCII
    out, its default separators), made of its C parts (_json) without
    importing the package, which imports re and compiles its patterns
    (~5 ms of every runner's start). Where those parts are missing or do
    not answer as json would, the json package's own."""
    try:
        import _json
        scan = _json.make_scanner(types.SimpleNamespace(
            strict=True, object_hook=None, object_pairs_hook=None, parse_float=float, parse_int=int,
            parse_constant={"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}.__getitem__))

        def unserializable(o):
            raise TypeError("Object of type %s is not JSON serializable" % type(o).__name__)
        encode = _json.make_encoder(None, unserializable, _json.encode_basestring_ascii, None, ": ", ", ", False, False, True)

        def dumps(obj):
            return "".join(encode(obj, 0))

        def loads(data):
            s = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
            try:
                obj, end = scan(s, 0)
            except StopIteration as e:
                raise ValueError("not JSON at character %s" % e.value) from None
            if s[end:].strip(" \t\n\r"):
                raise ValueError("not JSON: extra data at character %d" % end)
            return obj
        sample = {"a": [1, -2.5, "\u00e9\n\"", None, True, False], "b": {}}
        if dumps(sample) != '{"a": [1, -2.5, "\\u00e9\\n\\"", null, true, false], "b": {}}' or loads(dumps(sample).encode()) != sample:
            raise ValueError("_json differs")
        return loads, dumps
    except Exception:
        import json
        return json.loads, json.dumps


json_loads, json_dumps = json_codec()


# Modules of the standard library the runner needs only now and then
# (tracebacks, zip and folder programs, threads). With a workspace that other runs
# write too (code storage, sessions), the runner imports them before any
# request (preload), so that no file planted there shadows them or what
# they import, even for a program that imports them itself. A private
# workspace (pybox eval: a tmpfs of its container's own, PYBOX_PRIVATE=1)
# holds only what its one program writes: there each is imported when
# first needed, through stdlib, which spares every container their import
# (~7 ms of CPU of the ~50 ms its runner costs).
LAZY = ("linecache", "pkgutil", "runpy", "threading", "tokenize", "traceback")


def preload():
    for name in LAZY:
        importlib.import_module(name)


def stdlib(name):
    """The standard library's module name (one of LAZY), imported now if
    it was not, from the runner's own import path (never the program's)."""
    with own_imports():
        return importlib.import_module(name)


def become_worker(warm):
    """Signals and standard streams as a plain interpreter has them; warm:
    the lazy imports of LAZY's modules too, before any program."""
    for sig in signal.valid_signals():
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            try:
                signal.signal(sig, signal.SIG_DFL)
            except (OSError, ValueError, RuntimeError):
                pass
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    quietly(lambda: sys.modules["ctypes"].CDLL(None).prctl(4, 1, 0, 0, 0))  # dumpable, like any program
    sys.stdout = sys.__stdout__ = text_stream(1, sys.__stdout__)
    sys.stderr = sys.__stderr__ = text_stream(2, sys.__stderr__)
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(os.fdopen(0, "rb", closefd=False), encoding="utf-8")
    sys.dont_write_bytecode = True
    if warm:
        stdlib("traceback").format_exception(ValueError("warm-up"))  # its lazy imports, before any program
        stdlib("pkgutil").get_importer(os.getcwd())
    gc.freeze()  # and what the warm-up made: only the program's own objects are collected


def start_programs(first_path):
    """Add what a plain interpreter has on sys.path: the program's folder,
    PYTHONPATH, site-packages (and their .pth files). Called once the first
    request has arrived, never before. What the runner imports for the
    program from then on resolves without the first two (see own_imports)."""
    site.main()
    OWN_IMPORTS.update(path=list(sys.path), meta_path=list(sys.meta_path), path_hooks=list(sys.path_hooks))
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[0:0] = [first_path] + extra


# The import system of the runner's own work: sys.path (the standard
# library and site-packages) and its finders as they were before a
# program's folder came first (set by start_programs).
OWN_IMPORTS = {}


class own_imports:
    """While the runner works for a program (its traceback, its figures),
    a module imported on the way (Python 3.11's traceback imports ast
    lazily, savefig fractions...) comes from the standard library or
    site-packages, never from the program's folder, PYTHONPATH or a finder
    the program added: a file an earlier run left in the code storage
    never runs inside a program that did not import it itself."""

    def __enter__(self):
        self.saved = sys.path, sys.meta_path, sys.path_hooks
        if OWN_IMPORTS:
            sys.path, sys.meta_path, sys.path_hooks = (list(OWN_IMPORTS[k]) for k in ("path", "meta_path", "path_hooks"))

    def __exit__(self, *exc):
        sys.path, sys.meta_path, sys.path_hooks = self.saved


def quietly(call):
    """Call call(), ignoring the failure of a stream the program closed or
    replaced (stdout or stderr), as the interpreter does."""
    try:
        call()
    except Exception:
        pass


def save_figures(outdir, max_figures):
    """Save every open matplotlib figure as outdir/figure-N.png, then close them."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None or not outdir:
        return
    with own_imports():
        figures(plt, outdir, max_figures)


def figures(plt, outdir, max_figures):
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


def user_traceback(e, filename):
    """Print e's traceback starting at the first frame of the user's code.
    A file that did not compile gets no traceback at all, as under python."""
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    if tb is None and not isinstance(e, SyntaxError):
        tb = e.__traceback__
    with own_imports():
        quietly(lambda: stdlib("traceback").print_exception(type(e), e, tb))


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


def guarded(run, filename, outdir):
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
        save_figures(outdir, int(os.environ.get("PYBOX_MAX_FIGURES", "8")))


def read_request(f):
    """Read one b"<len>\\n<json>" request from the binary file f; None at EOF."""
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
    return json_loads(body)


def feed_stdin(text):
    """Make fd 0 (and sys.stdin) read text, or /dev/null when text is None."""
    if text is None:
        fd = os.open(os.devnull, os.O_RDONLY)
    else:
        fd, w = os.pipe()
        data = text.encode("utf-8", "surrogateescape")

        def write():
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(w, view):]
            except OSError:
                pass  # the program stopped reading its input
            finally:
                os.close(w)
        stdlib("threading").Thread(target=write, daemon=True).start()
    os.dup2(fd, 0)
    os.close(fd)
    sys.stdin = io.TextIOWrapper(os.fdopen(0, "rb", closefd=False), encoding="utf-8")


def run_once(requests, ctl, channel):
    """once: wait for the request, run its file as __main__, and return its
    status (the caller exits with it; without tests, through finish_once).
    The control pipe stays open only for a request with tests: there the
    worker attests on it that they passed (see run_tested)."""
    req = read_request(requests)
    if req is None:
        os._exit(0)  # the pool discarded us unused
    attest = req.pop("attest", None)
    if attest is None or req.get("test") is None:
        close_channel((ctl,))
    if req.get("tools") is not None:
        install_tools(req["tools"], channel)
    else:
        close_channel(channel)  # no code mode: the program gets no descriptor of the runner's
    path = req["file"]
    outputs = req.get("outputs") or ""
    os.environ["PYBOX_OUTPUTS"] = outputs
    feed_stdin(req.get("stdin"))
    start_programs(os.path.dirname(os.path.abspath(path)))
    sys.argv = [path] + [str(a) for a in (req.get("args") or [])]
    if req.get("code") is not None:  # the program came with the request (pybox eval)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8", errors="surrogateescape") as f:
                f.write(req["code"])
        except OSError as e:
            print("pybox: could not write the program to %s: %s" % (path, e), file=sys.stderr)
            return 2
    init = req.get("variables") or None  # bound as globals before the program runs
    if req.get("text") is not None:  # the file as pybox read and checked it: path is only its name
        data = binascii.a2b_base64(req["text"])
        if is_zip(data):
            runpy = stdlib("runpy")
            return finish_once(guarded(lambda: runpy.run_path(private_copy(data), init_globals=init, run_name="__main__"), path, outputs), None)
        main = main_module(path, init)
        return finish_once(guarded(lambda: exec_bytes(data, path, main), path, outputs), main)
    if not os.path.isfile(path):
        print("python: can't open file %r: [Errno 2] No such file or directory" % path, file=sys.stderr)
        return 2
    if req.get("test") is not None:
        return run_tested(path, req["test"], outputs, ctl, attest)
    if importer_of(path) is not None:  # a zip archive or a folder with a __main__.py
        runpy = stdlib("runpy")
        return finish_once(guarded(lambda: runpy.run_path(path, init_globals=init, run_name="__main__"), path, outputs), None)
    main = main_module(path, init)
    return finish_once(guarded(lambda: exec_file(path, main), path, outputs), main)


def main_module(path, init=None):
    """A new __main__ module for the file at path, in sys.modules, as
    `python FILE` makes it (it stays there until the end, as there)."""
    main = types.ModuleType("__main__")
    if init:
        main.__dict__.update(init)
    # The module's own names win over variables of the same names, as with runpy.
    main.__dict__.update(__name__="__main__", __file__=path, __cached__=None, __doc__=None, __loader__=None,
                         __package__=None, __spec__=None, __builtins__=__builtins__)
    sys.modules["__main__"] = main
    return main


def exec_file(path, main):
    """Run the file at path (source, or compiled as python runs a .pyc) in main."""
    with io.open_code(path) as f:
        data = f.read()
    exec_bytes(data, path, main)


def exec_bytes(data, path, main):
    """Run data, the content of the file at path (source, or compiled as
    python runs a .pyc), in main, without opening path."""
    code = read_code(data)
    loader = importlib.machinery.SourcelessFileLoader
    if code is None:
        code = compile(data, path, "exec", dont_inherit=True)
        loader = importlib.machinery.SourceFileLoader
    main.__loader__ = loader("__main__", path)
    exec(code, main.__dict__)


def importer_of(path):
    """What pkgutil.get_importer(path) gives (without importing pkgutil): the
    finder of the first path hook that takes path, None when none does."""
    try:
        return sys.path_importer_cache[path]
    except KeyError:
        pass
    for hook in sys.path_hooks:
        try:
            importer = hook(path)
        except ImportError:
            continue
        sys.path_importer_cache.setdefault(path, importer)
        return importer
    return None


def read_code(data):
    """What pkgutil.read_code gives for a file holding data (without
    importing pkgutil): the code of a compiled file, None when data does
    not start with this Python's magic number."""
    if data[:4] != importlib._bootstrap_external.MAGIC_NUMBER:
        return None
    return marshal.loads(data[16:])  # past the header


def is_zip(data):
    """Whether data is a zip archive (python runs one's __main__.py): its
    end-of-central-directory record is in its last 64 KiB."""
    return b"PK\x05\x06" in data[-(65536 + 22):]


def private_copy(data):
    """A new file in the container's own /tmp holding data, for runpy."""
    path = "/tmp/pybox-main-%s.pyz" % os.urandom(8).hex()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


WRITABLE = (io.BufferedWriter, io.BufferedRandom, io.BufferedRWPair, io.TextIOWrapper)
FAST_EXIT_BLOCKS = 1 << 20  # above this many live small objects, the interpreter's own exit


def clear_module(d):
    """Clear a module's globals as the interpreter's teardown does: names
    with one leading underscore first, then all but __builtins__. What they
    alone held goes in that order: a file left open is flushed before the
    buffer under it goes (a collection of the globals' cycle would close
    them in any order, and lose what the text layer held)."""
    for k in list(d):
        if isinstance(k, str) and k[:1] == "_" and k[1:2] != "_":
            d[k] = None
    for k in list(d):
        if k != "__builtins__":
            d[k] = None


def finish_once(status, main):
    """once without tests: do what the interpreter's exit does that anyone
    can see, then end the worker with status at once. That is: wait for the
    non-daemon threads, run the atexit handlers, clear the program's
    globals as the teardown does, flush every file still open for writing
    (what a program left unclosed is on disk, as under python), collect the
    program's garbage (finalizers run, as at exit) and flush the standard
    streams. What is skipped is the interpreter's teardown of every other
    module and object (~5 ms on a fast machine, before pybox could have its
    verdict); an object another module keeps alive then gets no finalizer
    call, which CPython does not promise either. A program that leaves a
    large heap gets the interpreter's own exit instead: finding its open
    files would take memory in proportion to it."""
    # threading: only once imported (by the program, or for its stdin), as
    # the interpreter's exit waits for its threads only then.
    threading = sys.modules.get("threading")
    shutdown, exitfuncs = getattr(threading, "_shutdown", None), getattr(atexit, "_run_exitfuncs", None)
    if (threading is not None and shutdown is None) or exitfuncs is None:
        return status  # an interpreter without them: its own exit
    try:
        if shutdown is not None:
            shutdown()
    except BaseException:
        pass  # as at exit: the status stands
    exitfuncs()
    if main is not None:
        clear_module(main.__dict__)
    if sys.getallocatedblocks() > FAST_EXIT_BLOCKS:
        return status
    # Flush before the collection: it finalizes the files in a cycle in no
    # particular order (see clear_module).
    for f in gc.get_objects():
        if isinstance(f, WRITABLE):
            try:
                if not f.closed:
                    f.flush()
            except BaseException:
                pass  # as at exit: a file that cannot be flushed does not change the status
    gc.collect()
    finish(status)


def run_tested(path, test, outdir, ctl, attest):
    """once with tests (pybox eval): run the file as __main__, then the
    tests in its globals, as `python` would run the two joined, except that
    the program cannot end early as a success: a SystemExit it raises before
    its tests have run is a failure, a failing test ends the worker at
    once, so no atexit handler or thread the program left can change the
    status, and a status 0 counts only once the worker has written
    b"pass <attest>" on its control pipe after the tests passed: the
    supervisor makes a 0 without it a failure, so ending the process
    early (os._exit(0), an exec, from any thread) cannot pass. The tests
    are compiled before the program runs."""
    try:
        tests = compile(test, "<tests>", "exec")
    except SyntaxError as e:
        user_traceback(e, "<tests>")
        finish(1)
    main = main_module(path)
    try:
        exec_file(path, main)
    except SystemExit as e:
        status = exit_status(e)
        quietly(lambda: print("pybox: the program exited (status %d) before its tests ran" % status, file=sys.stderr))
        finish(status or 1)
    except BaseException as e:
        user_traceback(e, path)
        finish(130 if isinstance(e, KeyboardInterrupt) else 1)
    def run_tests():
        try:
            exec(tests, main.__dict__)
        except SystemExit as e:  # raised by the program's code the tests called
            status = exit_status(e)
            quietly(lambda: print("pybox: the program exited (status %d) before its tests finished" % status, file=sys.stderr))
            finish(status or 1)

    status = guarded(run_tests, "<tests>", outdir)
    if status != 0:
        finish(status)
    try:
        os.write(ctl, b"pass %s\n" % attest.encode())
    except (OSError, AttributeError):
        pass  # the program closed or replaced the pipe: no pass
    return 0


def finish(status):
    """Flush the standard streams and end the worker with status now."""
    for f in (sys.stdout, sys.stderr):
        quietly(lambda: f.flush())
    os._exit(status)


class Kernel:
    """kernel: one program at a time, globals kept between them."""

    def __init__(self, requests, ctl, channel):
        self.requests, self.ctl, self.channel = requests, ctl, channel
        self.pipes = {1: os.dup(1), 2: os.dup(2)}  # to restore fds a program closed
        self.streams = {1: sys.stdout, 2: sys.stderr}
        main = types.ModuleType("__main__")
        sys.modules["__main__"] = main
        self.globals = main.__dict__
        self.globals["__builtins__"] = __builtins__
        self.started = False

    def reset_streams(self):
        """Undo what the last program did to fds 1 and 2 and to sys.stdout
        and sys.stderr (closed, replaced, redirected)."""
        for fd, w in self.pipes.items():
            os.dup2(w, fd)
            if self.streams[fd].closed:
                self.streams[fd] = text_stream(fd, self.streams[fd])
        sys.stdout = sys.__stdout__ = self.streams[1]
        sys.stderr = sys.__stderr__ = self.streams[2]

    def execute(self, req):
        if not self.started:
            start_programs("")  # like python -c: the working directory first
            self.started = True
        filename = req.get("filename") or "<session>"
        outputs = req.get("outputs") or ""
        self.reset_streams()
        data = (req.get("stdin") or "").encode("utf-8", "surrogateescape")
        sys.stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")  # with .buffer, like a real stdin
        os.environ["PYBOX_OUTPUTS"] = outputs
        sys.argv = [filename] + [str(a) for a in (req.get("args") or [])]
        if req.get("tools") is not None and self.channel:
            install_tools(req["tools"], self.channel)
        elif self.channel and req.get("tools") is None:
            close_channel(self.channel)
            self.channel = ()  # once: those numbers may be the program's descriptors from now on
        self.globals.update(req.get("variables") or {})  # bound before the program runs
        run = lambda: exec(compile(req["code"], filename, "exec"), self.globals)
        return guarded(run, filename, outputs)

    def serve(self):
        while True:
            req = read_request(self.requests)
            if req is None:
                os._exit(0)
            status = self.execute(req)
            for f in (sys.stdout, sys.stderr):
                quietly(lambda: f.flush())
            os.write(self.ctl, b"done %d %d\n" % (req.get("seq", 0), status))


class MCPToolError(Exception):
    """A downstream MCP tool failed, was refused, or did not answer."""


def install_tools(names, channel):
    """Put the pybox_tools module in sys.modules: call_mcp_tool(name, **params),
    list_mcp_tools(), AVAILABLE_MCP_TOOLS and tools.SERVER.TOOL(**params),
    calling pybox's downstream MCP servers over the runner's channel (one
    call at a time; the reply is a Python value or an MCPToolError)."""
    call_w, reply_r = channel
    mod = sys.modules.get("pybox_tools")
    if mod is None:
        mod = types.ModuleType("pybox_tools")
        mod.__doc__ = "Call the tools of pybox's downstream MCP servers from Python."
        lock = stdlib("threading").Lock()
        state = {"id": 0, "buf": b""}

        def read_reply():
            while b"\n" not in state["buf"]:
                chunk = os.read(reply_r, 1 << 16)
                if not chunk:
                    raise MCPToolError("the tool channel is closed")
                state["buf"] += chunk
            line, state["buf"] = state["buf"].split(b"\n", 1)
            return json_loads(line)

        def call_mcp_tool(name, **params):
            """Call a downstream tool by its qualified name, SERVER.TOOL, with
            keyword arguments; return its result as a Python value."""
            with lock:
                state["id"] += 1
                msg = json_dumps({"id": state["id"], "tool": str(name), "args": params}).encode() + b"\n"
                view = memoryview(msg)
                while view:
                    view = view[os.write(call_w, view):]
                reply = read_reply()
            if reply.get("error") is not None:
                raise MCPToolError(reply["error"])
            return reply.get("result")

        def list_mcp_tools():
            """The qualified names (SERVER.TOOL) of the tools code may call."""
            return list(mod.AVAILABLE_MCP_TOOLS)

        class Server:
            def __init__(self, name):
                self._name = name

            def __getattr__(self, tool):
                if tool.startswith("_"):
                    raise AttributeError(tool)
                return lambda **params: call_mcp_tool(self._name + "." + tool, **params)

            def __dir__(self):
                return sorted(n.split(".", 1)[1] for n in mod.AVAILABLE_MCP_TOOLS if n.startswith(self._name + "."))

        class Tools:
            def __getattr__(self, server):
                if server.startswith("_"):
                    raise AttributeError(server)
                return Server(server)

            def __dir__(self):
                return sorted({n.split(".", 1)[0] for n in mod.AVAILABLE_MCP_TOOLS})

        mod.call_mcp_tool, mod.list_mcp_tools, mod.tools, mod.MCPToolError = call_mcp_tool, list_mcp_tools, Tools(), MCPToolError
        sys.modules["pybox_tools"] = mod
    mod.AVAILABLE_MCP_TOOLS = list(names)


def close_channel(channel):
    """Close the tool-call pipes (the runner gives them to every worker;
    without code mode the program must not hold them)."""
    for fd in channel:
        try:
            os.close(fd)
        except OSError:
            pass  # closed already


def worker(mode, requests_fd, ctl_fd, channel, warm):
    become_worker(warm)
    requests = os.fdopen(requests_fd, "rb", buffering=0)
    if mode == "once":
        return run_once(requests, ctl_fd, channel)
    return Kernel(requests, ctl_fd, channel).serve()
