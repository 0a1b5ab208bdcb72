"""pybox in-image runner, passed to the interpreter as `python -I -S -c`.

Usage:
    runner once     run one program, then exit with its status (runs, warm pool)
    runner kernel   run programs until stdin closes; globals persist (sessions)

Two processes. The supervisor is the container's PID 1: it makes itself
non-dumpable (so no process of the container can ptrace it or open its
/proc/1/fd, /proc/1/mem), ignores every signal it can (and as PID 1 cannot
be killed from inside), and alone holds the container's stdin and stdout:
the private channel to pybox. The worker is forked from it before any
request and runs the user's programs with fds 0-2 of its own (a pipe or
/dev/null, and two pipes back to the supervisor) and no other descriptor
of the supervisor's. Nothing the worker does can write a frame: the
supervisor frames the worker's output itself and the verdict of `once` is
the worker's exit status from waitpid. The interpreter starts isolated and
without site (-I -S): no module is ever resolved from the working directory
or from site-packages until a program's request has arrived.

    request  (pybox -> supervisor, stdin):  b"%d\\n" % len(body) + body, JSON
        once:   {"nonce", "file", "stdin" (null = /dev/null), "args", "outputs", "test" (eval), "linger", "cap"}
        kernel: {"nonce", "code", "filename", "stdin", "outputs", "cap"}
        cap: bytes of each stream (out, err) framed for the request; what
        comes past it is read, counted and dropped here, never sent
    frame    (supervisor -> pybox, stdout): b"PYBOX <nonce> <kind> <len>\\n" + payload
        ready (nonce "-", once pybox has spoken: its first bytes on stdin, a
        lone newline or a request; a backend that cannot attach before the
        container starts, such as Kubernetes, would miss a frame written earlier;
        its payload: this runner's code as the bootstrap compiled it, zlib of
        marshal, when pybox asked for it, else empty: see images.RunnerArgs),
        out, err, done ({"code": status, "dropped": bytes past the cap, both streams,
        "oom": after a SIGKILL (status 137), whether the kernel's OOM killer sent
        it; absent otherwise, or when the cgroup does not say: see oom_word}),
        ended (kernel: {"code", "oom"}, the worker died; the supervisor exits next),
        abort (why the worker was ended: it broke its control pipe),
        policy ({"rule", "detail", "line"}: the request's "guard" rules refused its
        code, checked here before the worker sees it; once: the runner then exits),
        call (a line the program wrote on its tool-call pipe: code mode)
    reply    (pybox -> supervisor, stdin, framed as a request): {"reply": {"id", "result" | "error"}},
             written to the worker's reply pipe, where pybox_tools reads it
    net      (supervisor -> pybox, a frame of kind "net"; pybox -> supervisor,
             b"N%d\\n" % len(body) + body on stdin): a message of the egress
             channel (forward.py, internal/egressmux), when PYBOX_EGRESS is
             "channel", served in the supervisor's poll loop

The nonce (a per-request secret) never reaches the worker. In kernel mode
the worker reports the end of each program on a control pipe ("done SEQ N"),
which the program, running in the worker, can reach too: it can end its
own turn early (as it could by returning while a thread runs on), but
anything else it writes there discards the session. In once mode the
verdict is the worker's exit status; the worker keeps the control pipe only
for a request with tests (pybox eval), where a status 0 counts only if the
worker wrote "pass TOKEN" there after the tests passed (TOKEN: a secret the
supervisor adds to that request as "attest"): a program that ends its
process early with status 0 (os._exit, an exec, from any thread) fails.
The program shares the worker's memory, so a program written against this
runner could find the token, as it could patch the tests' names; what it
cannot do is pass by ending early in any generic way. Output that threads
print after a done frame is framed under the nonce in force when the
supervisor reads it. If the worker dies the supervisor exits with its status.
When its stdin closes (pybox discards the container, or is gone: Docker and
Kubernetes close it with the attach stream, StdinOnce) the supervisor exits
at once, and every process of the container with it; so does a supervisor
that pybox never spoke to within GREET seconds of its start (a pod that its
server, killed meanwhile, created but never attached to).
"""
import _signal as signal
import gc
import os
import select
import sys
import time

MAX_DRAIN = 1 << 20  # bytes read from the worker's pipes after it says done
MAX_CALL = 512 << 10  # bytes of one tool call (a frame holds at most 1 MiB)
LINGER = 5  # seconds the supervisor of a once container waits after its verdict
GREET = 60  # seconds the supervisor waits for pybox's first bytes (pybox gives up on a runner that is not ready within a minute)


def greet_seconds():
    """GREET, or fewer seconds when PYBOX_GREET says so (the tests', to see
    a runner end without waiting a minute; never more than GREET)."""
    try:
        return min(GREET, max(1.0, float(os.environ.pop("PYBOX_GREET", GREET))))
    except ValueError:
        return GREET


def refuse(why):
    os.write(2, ("pybox runner: %s\n" % why).encode())
    os._exit(70)


def harden():
    """Make this process unreachable from the rest of the container."""
    if os.getpid() != 1:
        refuse("not PID 1 of its container (was the interpreter started through a launcher "
               "that stays alive, such as `conda run`?)")
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE = 4
            refuse("prctl(PR_SET_DUMPABLE) failed: errno %d" % ctypes.get_errno())
    except (ImportError, OSError, AttributeError) as e:
        refuse("cannot protect the runner's channel: %s" % e)
    for sig in signal.valid_signals():
        if sig not in (signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD):
            try:
                signal.signal(sig, signal.SIG_IGN)
            except (OSError, ValueError, RuntimeError):
                pass


def confine():
    """What a pod does not set for the program: PYBOX_RLIMITS ("fsize=N,
    nofile=N,nproc=N", soft and hard), set here before the worker exists;
    and the cluster's KUBERNETES_* variables, removed from the environment."""
    import resource
    for item in filter(None, os.environ.pop("PYBOX_RLIMITS", "").split(",")):
        name, _, n = item.partition("=")
        try:
            resource.setrlimit(getattr(resource, "RLIMIT_" + name.upper()), (int(n), int(n)))
        except (AttributeError, ValueError, OSError) as e:
            refuse("cannot set the limit %s: %s" % (item, e))
    for k in [k for k in os.environ if k.startswith("KUBERNETES_")]:
        del os.environ[k]


def oom_kills():
    """How many processes the kernel's OOM killer has killed in this
    container's memory cgroup (cgroup v2's memory.events, v1's
    memory.oom_control; files no process of the container can write), or
    None where neither says (gVisor): then pybox asks the daemon."""
    for path in ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"):
        try:
            with open(path, "rb") as f:
                for line in f.read(4096).splitlines():
                    word = line.split()
                    if len(word) == 2 and word[0] == b"oom_kill":
                        return int(word[1])
        except (OSError, ValueError):
            pass
    return None


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def frame(nonce, kind, payload=b""):
    write_all(1, b"PYBOX %s %s %d\n" % (nonce.encode(), kind.encode(), len(payload)) + payload)


def status_of(st):
    """The exit status a shell reports for a wait status."""
    if os.WIFSIGNALED(st):
        return 128 + os.WTERMSIG(st)
    return os.WEXITSTATUS(st) if os.WIFEXITED(st) else 1


class Supervisor:
    """PID 1: relays requests to the worker and frames what comes back."""

    def __init__(self, once):
        self.once = once
        self.nonce = "-"
        self.inbuf = b""
        self.greeted = False  # pybox has written: ready was sent
        self.compiled = b""  # the ready frame's payload: see compiled_self
        self.egress = None  # the egress channel (forward.Channel), when PYBOX_EGRESS is "channel"
        self.lingers = False  # once: wait for pybox after the verdict (see linger)
        self.pending = b""  # request bytes not yet written to the worker
        self.served = False  # a request has been taken (once: the one)
        self.seq = 0  # requests forwarded to the worker
        self.cap = 0  # bytes of each stream framed per request (0: all)
        self.sent = {"out": 0, "err": 0}  # framed for the request in force
        self.dropped = 0  # bytes past the cap, read and dropped
        self.ctl = b""
        # once with tests (pybox eval): a pass needs the worker's word, on
        # its control pipe, that the tests ran to their end (see attest).
        self.attest = None
        self.attested = False
        self.ooms = oom_kills()  # before the worker exists: see oom_word
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(self.wake_w)
        req_r, self.req_w = os.pipe()
        self.ctl_r, ctl_w = os.pipe()
        self.out_r, out_w = os.pipe()
        self.err_r, err_w = os.pipe()
        # Code mode: the program's tool calls (a line of JSON each) and their
        # replies, relayed to and from pybox under the request's nonce.
        self.call_r, call_w = os.pipe()
        reply_r, self.reply_w = os.pipe()
        self.calls = b""
        self.replies = b""  # reply bytes not yet written to the worker
        # Everything imported so far (the runner, the standard library it
        # uses) moves to the collector's permanent generation: no collection
        # in the worker, least of all the full one at interpreter exit,
        # walks it, so the worker neither copies the pages it shares with
        # this process nor spends the time (a once worker's exit: ~9 -> ~5 ms).
        gc.freeze()
        self.pid = os.fork()
        if self.pid == 0:
            self.child_fds = (req_r, ctl_w, out_w, err_w, call_w, reply_r)
            return
        for fd in (req_r, ctl_w, out_w, err_w, call_w, reply_r):
            os.close(fd)
        for fd in (self.req_w, self.out_r, self.err_r, self.ctl_r, self.call_r, self.reply_w):
            os.set_blocking(fd, False)
        self.poller = select.poll()
        for fd in (0, self.out_r, self.err_r, self.ctl_r, self.wake_r, self.call_r):
            self.poller.register(fd, select.POLLIN)
        self.handlers = {self.req_w: self.feed, self.out_r: self.relay, self.err_r: self.relay,
                         self.ctl_r: self.control, self.wake_r: self.wakeup, 0: self.requests,
                         self.call_r: self.call, self.reply_w: self.reply}

    def watch(self, fd, handler, mask):
        """Poll fd for mask, calling handler(fd) (the egress channel's sockets)."""
        self.handlers[fd] = handler
        self.poller.register(fd, mask)

    def unwatch(self, fd):
        self.handlers.pop(fd, None)
        self.poller.unregister(fd)

    def serve(self, greet):
        handlers = self.handlers
        greet_by = time.monotonic() + greet
        while True:
            timeout = None
            if not self.greeted:
                left = greet_by - time.monotonic()
                if left <= 0:
                    # pybox never spoke: its server died before it attached
                    # (a pod started after its server was killed). Nobody
                    # will: end, as when stdin closes.
                    os._exit(0)
                timeout = left * 1000
            for fd, _ in self.poller.poll(timeout):
                h = handlers.get(fd)  # None: unwatched by an earlier handler of this round
                if h is not None:
                    h(fd)

    def requests(self, fd):
        data = os.read(0, 1 << 20)
        if not data:
            # pybox closed our stdin: it discards this container, or it is
            # gone (killed, crashed: the daemon closes a container's stdin
            # with its attach stream). Nobody can use what runs here now:
            # as PID 1, the supervisor ends every process of the container
            # with it, a program in the middle of its run included.
            os._exit(0)
        if not self.greeted:
            self.greeted = True
            frame("-", "ready", self.compiled)
            self.compiled = b""
            if data[:1] == b"\n":
                data = data[1:]
        buf, pos = self.inbuf + data, 0
        while True:
            kind, body, pos = take_message(buf, pos)
            if kind is None:
                break
            if kind == "net":
                if self.egress is not None:
                    self.egress.message(body)
                continue
            self.request(json_loads(body))
        self.inbuf = buf[pos:]

    def request(self, req):
        if "reply" in req:  # pybox answering a tool call of the program
            self.forward_reply(req["reply"])
            return
        if self.once and self.served:
            return  # once takes one request
        self.nonce = str(req.pop("nonce", "-"))
        self.cap, self.sent, self.dropped = int(req.pop("cap", 0) or 0), {"out": 0, "err": 0}, 0
        self.lingers = bool(req.pop("linger", False))
        guard = req.pop("guard", None)
        if guard is not None:
            code = guard.get("code")
            if code is None:
                code = req.get("code") or ""
            why = guard_violation(code, guard.get("rules") or {})
            if why is not None:  # the program never reaches the worker
                frame(self.nonce, "policy", json_dumps(why).encode())
                if self.once:
                    os._exit(0)
                return
        if not self.pending:
            self.poller.register(self.req_w, select.POLLOUT)
        self.seq += 1
        req["seq"] = self.seq  # the worker's done names it: a late one is dropped
        if self.once and req.get("test") is not None:
            self.attest = os.urandom(16).hex()
            req["attest"] = self.attest
        self.served = True
        body = json_dumps(req).encode()
        self.pending += b"%d\n" % len(body) + body

    def feed(self, fd):
        try:
            self.pending = self.pending[os.write(self.req_w, self.pending):]
        except BlockingIOError:
            return
        except OSError:  # the worker closed its end: it dies, or has died
            self.pending = b""
        if not self.pending:
            self.poller.unregister(self.req_w)

    def call(self, fd):
        """Frame each whole line the program wrote on its call pipe as a call
        under the nonce in force; an overlong one gets an error reply."""
        try:
            data = os.read(self.call_r, 1 << 16)
        except BlockingIOError:
            return
        if not data:
            self.poller.unregister(self.call_r)
            return
        self.calls += data
        while b"\n" in self.calls:
            line, self.calls = self.calls.split(b"\n", 1)
            frame(self.nonce, "call", line)
        if len(self.calls) > MAX_CALL:
            self.calls = b""
            self.forward_reply({"id": None, "error": "the tool call is larger than %d bytes" % MAX_CALL})

    def forward_reply(self, reply):
        if not self.replies:
            self.poller.register(self.reply_w, select.POLLOUT)
        self.replies += json_dumps(reply).encode() + b"\n"

    def reply(self, fd):
        try:
            self.replies = self.replies[os.write(self.reply_w, self.replies):]
        except BlockingIOError:
            return
        except OSError:  # the worker is gone
            self.replies = b""
        if not self.replies:
            self.poller.unregister(self.reply_w)

    def relay(self, fd, limit=65536):
        """Frame up to limit bytes of what fd holds now."""
        kind = "out" if fd == self.out_r else "err"
        got = 0
        while got < limit:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                return
            if not chunk:
                self.poller.unregister(fd)
                return
            self.forward(kind, chunk)
            got += len(chunk)

    def forward(self, kind, chunk):
        """Frame chunk, or the part of it within the request's cap for its
        stream; the rest is only counted (a flood costs the host nothing)."""
        if self.cap:
            room = max(self.cap - self.sent[kind], 0)
            if len(chunk) > room:
                self.dropped += len(chunk) - room
                chunk = chunk[:room]
            self.sent[kind] += len(chunk)
        if chunk:
            frame(self.nonce, kind, chunk)

    def verdict(self, code, oom=None):
        v = {"code": code, "dropped": self.dropped}
        if oom is not None:
            v["oom"] = oom
        frame(self.nonce, "done", json_dumps(v).encode())

    def oom_word(self, code):
        """Whether the OOM killer ended the worker (the cgroup's count of OOM
        kills went up since the supervisor started), when it was killed by
        SIGKILL; None otherwise, or when the cgroup does not say. The kernel counts
        the kill before it delivers the signal, so the answer is final
        when the worker's death is seen: no wait for the daemon, whose
        own word comes apart from the exit and late on a busy machine."""
        if code != 128 + signal.SIGKILL:
            return None  # no kill: nothing to say (and the frame stays as it was)
        now = oom_kills()
        if now is None or self.ooms is None:
            return None
        return now > self.ooms

    def drain(self):
        """Frame what the worker wrote before it said done or exited."""
        for fd in (self.out_r, self.err_r):
            try:
                self.relay(fd, MAX_DRAIN)
            except KeyError:  # already closed and unregistered
                pass

    def control(self, fd):
        try:
            data = os.read(self.ctl_r, 4096)
        except BlockingIOError:
            return
        if not data:
            try:
                self.poller.unregister(self.ctl_r)
            except KeyError:
                pass  # its end was seen before
            return
        if self.once:
            self.attestation(data)
            return
        self.ctl += data
        if b"\n" not in self.ctl and len(self.ctl) > 32:  # no "done N" is that long
            self.broken("the program wrote into the runner's control pipe")
            return
        while b"\n" in self.ctl:
            line, self.ctl = self.ctl.split(b"\n", 1)
            word = line.split(b" ")
            if len(word) != 3 or word[0] != b"done" or not (word[1].isdigit() and word[2].isdigit()):
                self.broken("the program wrote into the runner's control pipe")
                return
            if int(word[1]) != self.seq:  # an earlier request's end, reported late: its call is over
                continue
            self.drain()
            self.verdict(int(word[2]) & 0xFF)

    def attestation(self, data):
        """once: the worker's word that the tests passed, b"pass <token>",
        where the token came with the request. Anything else written there
        (only the program could) counts for nothing."""
        self.ctl = (self.ctl + data)[-64:]
        if self.attest and self.ctl.endswith(b"pass %s\n" % self.attest.encode()):
            self.attested = True  # after whatever the program wrote there first

    def broken(self, why):
        """End the worker and tell pybox why (it discards the container)."""
        os.kill(self.pid, signal.SIGKILL)
        self.drain()
        frame(self.nonce, "abort", why.encode())

    def wakeup(self, fd):
        os.read(self.wake_r, 512)
        while True:
            try:
                pid, st = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.pid:
                self.worker_ended(status_of(st))

    def worker_ended(self, code):
        self.drain()
        if self.once and self.attest:
            while not self.attested:  # what the worker wrote before it ended
                try:
                    data = os.read(self.ctl_r, 4096)
                except OSError:
                    break
                if not data:
                    break
                self.attestation(data)
            if code == 0 and not self.attested:
                frame(self.nonce, "err", b"pybox: the program ended its process with status 0 before its tests finished "
                      b"(os._exit or an exec, from any thread); that is a failure\n")
                code = 1
        oom = self.oom_word(code)
        if self.once and self.served:
            self.verdict(code, oom)
            if code < 128 and self.lingers:
                self.linger()
        elif not self.once and self.seq:
            # kernel: the session's worker died (its program's turn, or a
            # thread between turns); pybox reads why from this frame
            ended = {"code": code}
            if oom is not None:
                ended["oom"] = oom
            frame(self.nonce, "ended", json_dumps(ended).encode())
        os._exit(code & 0xFF)  # as PID 1: every other process of the container ends too

    def linger(self):
        """Asked for by the request ("linger": a backend whose stream drops
        what a container writes just before it exits, Kubernetes' attach):
        after the verdict, every other process of the container ends at once
        (nothing a program left runs on), then the supervisor waits for
        pybox to close the channel or remove the container, at most LINGER
        seconds, so the last frames are delivered. A worker killed by a
        signal (an OOM kill) exits at once: its container's end is the
        evidence. Docker delivers everything: there the runner exits at
        once, which ends the container sooner."""
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass  # nothing else runs
        end = time.monotonic() + LINGER
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return
            try:
                ready, _, _ = select.select([0], [], [], left)
                if ready and not os.read(0, 1 << 16):
                    return
            except OSError:
                return


def guard_violation(code, rules):
    """The first of the policy's static guardrails (see policies.Guard) that
    code breaks, as {"rule", "detail", "line"}, or None. A real parse, done
    here before the program reaches the worker: nothing of it has run."""
    if rules.get("max_chars") and len(code) > rules["max_chars"]:
        return {"rule": "max_chars", "detail": "%d characters; the limit is %d" % (len(code), rules["max_chars"]), "line": 0}
    lines = len(code.splitlines())
    if rules.get("max_lines") and lines > rules["max_lines"]:
        return {"rule": "max_lines", "detail": "%d lines; the limit is %d" % (lines, rules["max_lines"]), "line": 0}
    import ast
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None  # the program does not compile: Python says so, and nothing runs
    except (RecursionError, MemoryError, ValueError):
        return {"rule": "too_complex", "detail": "the program is nested too deeply to check", "line": 0}
    allow, deny = set(rules.get("imports_allow") or ()), set(rules.get("imports_deny") or ())
    names, attrs = set(rules.get("names_deny") or ()), set(rules.get("attributes_deny") or ())
    found = []

    def module(mod, node):
        parts = mod.split(".")
        prefixes = [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
        if any(p in deny for p in prefixes):
            found.append(("import_denied", mod, node))
        elif allow and not any(p in allow for p in prefixes):
            found.append(("import_not_allowed", mod, node))

    def name(n, node):
        if n in names:
            found.append(("name_denied", n, node))
        elif n in attrs:
            found.append(("attribute_denied", n, node))

    def const(node):
        """A string known without running anything: a literal, literals
        joined with +, or an f-string of literals."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = const(node.left), const(node.right)
            if left is not None and right is not None:
                return left + right
        if isinstance(node, ast.JoinedStr) and all(isinstance(v, ast.Constant) for v in node.values):
            return "".join(str(v.value) for v in node.values)
        return None

    def called(func):
        if isinstance(func, ast.Name):
            return func.id
        if isinstance(func, ast.Attribute):
            return func.attr
        return None

    try:
        walk(tree, ast, module, name, const, called, names | attrs)
    except (RecursionError, MemoryError):
        return {"rule": "too_complex", "detail": "the program is nested too deeply to check", "line": 0}
    if not found:
        return None
    rule, detail, node = min(found, key=lambda f: (getattr(f[2], "lineno", 0), getattr(f[2], "col_offset", 0)))
    return {"rule": rule, "detail": detail, "line": getattr(node, "lineno", 0)}


def walk(tree, ast, module, name, const, called, denied):
    """Report every import, name and attribute of tree the rules look at
    (denied: the denied names and attributes together)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                module(a.name, node)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                module(node.module, node)
                for a in node.names:
                    if a.name in denied:
                        name(a.name, node)
        elif isinstance(node, ast.Name):
            if node.id in denied:
                name(node.id, node)
        elif isinstance(node, ast.Attribute):
            name(node.attr, node)
        elif isinstance(node, ast.Call) and node.args:
            fn, first = called(node.func), const(node.args[0])
            if fn in ("__import__", "import_module") and first is not None:
                module(first, node)
            elif fn in ("getattr", "setattr", "delattr", "hasattr") and len(node.args) > 1:
                second = const(node.args[1])
                if second is not None:
                    name(second, node)
        elif isinstance(node, ast.Subscript):
            key = const(node.slice)
            if key is not None:
                name(key, node)


def take_message(buf, pos):
    """The message of buf at pos: b"<len>\\n<json>" (a request) or
    b"N<len>\\n<bytes>" (the egress channel's): ("request" or "net", body,
    the next message's pos), or (None, None, pos) while it is incomplete."""
    nl = buf.find(b"\n", pos, pos + 34)
    if nl < 0:
        if len(buf) - pos > 32:
            refuse("bad request header")
        return None, None, pos
    kind, start = ("net", pos + 1) if buf[pos:pos + 1] == b"N" else ("request", pos)
    try:
        n = int(buf[start:nl])
    except ValueError:
        refuse("bad request header")
    if n < 0:
        refuse("bad request header")
    end = nl + 1 + n
    if len(buf) < end:
        return None, None, pos
    return kind, buf[nl + 1:end], end


def worker_main(mode, fds, warm):
    """In the forked worker: keep nothing of the supervisor's but its own
    pipes (fds 0-2 are replaced first), then serve (worker.py)."""
    requests, ctl, out, err, call_w, reply_r = fds
    os.dup2(out, 1)
    os.dup2(err, 2)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    signal.set_wakeup_fd(-1)
    keep = {0, 1, 2, requests, ctl, call_w, reply_r}
    for fd in [int(f) for f in os.listdir("/proc/self/fd")]:
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass  # the listing's own descriptor, already closed
    return worker(mode, requests, ctl, (call_w, reply_r), warm)


def compiled_self(boot):
    """This runner's code as the bootstrap compiled it (zlib of marshal),
    when pybox asked for it (images.RunnerFrame): sent with the ready frame,
    before any program reached this container, for pybox to start the next
    containers of this image from; b"" otherwise (or without zlib)."""
    if not boot or not boot[1]:
        return b""
    try:
        import marshal
        import zlib
        return zlib.compress(marshal.dumps(boot[0]))
    except Exception:
        return b""


def main(argv):
    if argv not in (["once"], ["kernel"]):
        os.write(2, b"usage: runner once | runner kernel\n")
        return 2
    boot = globals().pop("_pybox_boot", None)  # (code, send it back): see images.RunnerArgs
    harden()
    confine()
    os.umask(int(os.environ.pop("PYBOX_UMASK", "022"), 8))  # 002 when sandboxes, a uid each, share files through their group
    greet = greet_seconds()
    warm = os.environ.pop("PYBOX_PRIVATE", "") != "1"  # a workspace other runs write too: see LAZY
    if warm:
        preload()
    egress = egress_listen()  # before the fork: the worker inherits the proxy variables, not the socket (worker_main closes it)
    sup = Supervisor(argv == ["once"])
    if sup.pid == 0:
        return worker_main(argv[0], sup.child_fds, warm)
    sup.compiled = compiled_self(boot)
    if egress:  # threads only after the fork
        sup.egress = egress_start(*egress, send=lambda payload: frame(sup.nonce, "net", payload), watch=sup.watch, unwatch=sup.unwatch)
    sup.serve(greet)


sys.exit(main(sys.argv[1:]))
