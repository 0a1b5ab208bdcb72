"""pybox egress forwarder: a run whose policy allows some hosts has pybox's
egress proxy, reached one of two ways; the container itself has no
interface but loopback. egress_listen binds 127.0.0.1 on a free port and
points the standard proxy variables (and pip's) at it, before the program's
process exists; egress_start then relays each connection, at most
EGRESS_MAX at once, in threads of the process that called it (the
supervisor, which the program cannot reach):

- PYBOX_EGRESS names a unix socket (under the read-only /run/pybox-egress,
  Docker and Podman): each connection is relayed to a connection of its own
  to the socket.
- PYBOX_EGRESS is "channel" (Kubernetes, where no host folder is mounted):
  each connection is a stream of messages over the runner's own channel to
  pybox (frames "net" up, "N" messages down; see internal/egressmux for the
  format and its bounds). Each stream has a window each way: the relay
  sends pybox at most EGRESS_WINDOW bytes it has not acknowledged, and
  pybox the same, so neither side holds more than a window per stream. A
  stream counts against EGRESS_MAX from its Open until pybox has closed it
  and its socket is closed, so pybox never sees more streams at once. The
  streams are served in the supervisor's poll loop, with no thread: a
  program's connections cost it no process of its pids limit.
"""
import os
import select

EGRESS_MAX = 64  # connections relayed at once; more wait in the listen queue (egressmux.DefaultStreams)
EGRESS_WINDOW = 64 << 10  # bytes in flight per stream and direction (egressmux.DefaultWindow)
EGRESS_DATA = 32 << 10  # most bytes in one Data message (egressmux.MaxData)
EGRESS_BUF = 256 << 10  # bytes a socket relay reads at once
EGRESS_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy", "PIP_PROXY")
OP_OPEN, OP_DATA, OP_EOF, OP_ACK, OP_CLOSE = 1, 2, 3, 4, 5


def egress_listen():
    """(listening socket, unix socket path or "channel"), or None without PYBOX_EGRESS."""
    path = os.environ.pop("PYBOX_EGRESS", "")
    if not path:
        return None
    global collections, socket, struct
    import collections, socket, struct  # only here: a run without egress spares their import
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.bind(("127.0.0.1", 0))
    ls.listen(128)
    url = "http://127.0.0.1:%d" % ls.getsockname()[1]
    for k in EGRESS_VARS:
        os.environ[k] = url
    os.environ["NO_PROXY"] = os.environ["no_proxy"] = "localhost,127.0.0.1,::1"
    return ls, path


def egress_start(ls, path, send=None, watch=None, unwatch=None):
    """Relay ls's connections to path; over the channel (path "channel"),
    in the caller's poll loop (watch, unwatch; see Channel), where
    send(payload) frames a message to pybox and the returned Channel takes
    pybox's messages. None for a socket, which needs none of send, watch and
    unwatch (the install's download step relays in threads)."""
    if path == "channel":
        return Channel(ls, send, watch, unwatch)
    global threading
    import threading  # only here: a run without egress threads spares its import
    slots = threading.BoundedSemaphore(EGRESS_MAX)
    threading.Thread(target=_egress_accept, args=(ls, path, slots), daemon=True).start()
    return None


def _egress_accept(ls, path, slots):
    while True:
        slots.acquire()
        try:
            c, _ = ls.accept()
        except OSError:
            slots.release()
            continue
        try:
            threading.Thread(target=_egress_relay, args=(c, path, slots), daemon=True).start()
        except Exception:  # no thread to spare (the pids limit): refuse this one
            c.close()
            slots.release()


def _egress_relay(c, path, slots):
    u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        u.connect(path)
        back = threading.Thread(target=_egress_pipe, args=(u, c), daemon=True)
        back.start()
        _egress_pipe(c, u)
        back.join()
    except Exception:
        pass  # the proxy is gone or refused: the program sees its connection end
    finally:
        c.close()
        u.close()
        slots.release()


def _egress_pipe(src, dst):
    """Copy src to dst through one buffer (recv_into: no bytes object per
    chunk), then half-close dst."""
    buf = bytearray(EGRESS_BUF)
    view = memoryview(buf)
    try:
        while True:
            n = src.recv_into(buf)
            if not n:
                break
            dst.sendall(view[:n])
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def _msg(op, sid, body=b""):
    return struct.pack(">BI", op, sid) + body


class Channel:
    """The program's connections to the proxy, as streams over the runner's
    channel, served in the supervisor's poll loop: no thread, non-blocking
    sockets, a stream's socket watched only for what it can do now (read
    while pybox's window allows, write while pybox's data waits).
    watch(fd, handler, mask) and unwatch(fd) are the loop's."""

    def __init__(self, ls, send, watch, unwatch):
        self.ls, self.send, self.watch, self.unwatch = ls, send, watch, unwatch
        self.streams = {}
        self.last = 0
        self.open = 0  # streams pybox has not closed, or whose socket is open
        ls.setblocking(False)
        self.accepting = False
        self.resume()

    def resume(self):
        if not self.accepting and self.open < EGRESS_MAX:
            self.accepting = True
            self.watch(self.ls.fileno(), self.accept, select.POLLIN)

    def accept(self, fd):
        while self.open < EGRESS_MAX:
            try:
                c, _ = self.ls.accept()
            except OSError:  # none waiting (BlockingIOError), or the program's reset
                return
            c.setblocking(False)
            self.last += 1
            self.open += 1
            s = Stream(self, self.last, c)
            self.streams[s.sid] = s
            self.send(_msg(OP_OPEN, s.sid))
            s.update()
        self.accepting = False
        self.unwatch(fd)

    def message(self, payload):
        """A message from pybox (checked there; pybox is trusted). One for
        a stream already gone is dropped."""
        if len(payload) >= 5:
            op, sid = struct.unpack(">BI", payload[:5])
            s = self.streams.get(sid)
            if s is not None:
                s.take(op, payload[5:])

    def release(self, s):
        del self.streams[s.sid]
        self.open -= 1
        self.resume()


class Stream:
    """One connection of the program's."""

    def __init__(self, ch, sid, sock):
        self.ch, self.sid, self.sock, self.fd = ch, sid, sock, sock.fileno()
        self.credit = EGRESS_WINDOW  # bytes pybox will still take
        self.queue = collections.deque()  # bytes from pybox for the program
        self.reading = True  # the program has not ended its side
        self.eof = False  # pybox sends no more
        self.closed = False  # pybox is done with the stream
        self.local = True  # the program's socket is open
        self.mask = 0

    def update(self):
        """Watch the socket for what it can do now; end it when nothing is left."""
        if not self.local:
            return
        if self.eof and not self.queue and not self.reading or self.closed and not self.queue:
            self.finish()
            return
        mask = (select.POLLIN if self.reading and self.credit > 0 and not self.closed else 0) | \
            (select.POLLOUT if self.queue else 0)
        if mask != self.mask:
            if self.mask:
                self.ch.unwatch(self.fd)
            if mask:
                self.ch.watch(self.fd, self.ready, mask)
            self.mask = mask

    def ready(self, fd):
        try:
            if self.queue:
                self.write()
            if self.reading and self.credit > 0 and not self.closed:
                self.read()
        except OSError:  # the program reset its connection
            self.reset()
        self.update()

    def reset(self):
        """The program's socket failed (the program reset it): nothing
        more goes either way; update then closes it and tells pybox."""
        self.reading = False
        self.queue.clear()
        self.eof = True

    def read(self):
        try:
            data = self.sock.recv(min(self.credit, EGRESS_DATA))
        except (BlockingIOError, InterruptedError):
            return
        if data:
            self.credit -= len(data)
            self.ch.send(_msg(OP_DATA, self.sid, data))
        else:
            self.reading = False
            self.ch.send(_msg(OP_EOF, self.sid))

    def write(self):
        sent = 0
        while self.queue:
            head = self.queue[0]
            try:
                n = self.sock.send(head)
            except (BlockingIOError, InterruptedError):
                break
            sent += n
            if n < len(head):
                self.queue[0] = head[n:]
                break
            self.queue.popleft()
        if sent and not self.closed:
            self.ch.send(_msg(OP_ACK, self.sid, struct.pack(">I", sent)))
        if not self.queue and self.eof and self.reading:
            self.sock.shutdown(socket.SHUT_WR)  # the program reads the end; it may still write

    def take(self, op, body):
        """A message of pybox's for this stream. A socket call failing here
        (the program reset its connection while nobody watched it: its
        window to pybox full) ends the stream, never the supervisor."""
        try:
            self.apply(op, body)
        except OSError:
            self.reset()
            self.update()

    def apply(self, op, body):
        if op == OP_DATA and self.local:
            self.queue.append(body)
        elif op == OP_ACK and len(body) == 4:
            self.credit += struct.unpack(">I", body)[0]
        elif op == OP_EOF:
            self.eof = True
            if not self.queue and self.local and self.reading:
                self.sock.shutdown(socket.SHUT_WR)
        elif op == OP_CLOSE:
            self.eof = self.closed = True
            if not self.local:
                self.ch.release(self)
                return
        self.update()

    def finish(self):
        """Close the program's socket; tell pybox, unless it closed first
        (then the stream's place is free)."""
        if self.mask:
            self.ch.unwatch(self.fd)
            self.mask = 0
        self.local = False
        self.sock.close()
        if self.closed:
            self.ch.release(self)
        else:
            self.ch.send(_msg(OP_CLOSE, self.sid))
