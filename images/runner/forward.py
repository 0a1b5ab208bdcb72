"""pybox egress forwarder: a run whose policy allows some hosts has pybox's
egress proxy on a unix socket (PYBOX_EGRESS names it, under the read-only
/run/pybox-egress); the container itself has no interface but loopback.
egress_listen binds 127.0.0.1 on a free port and points the standard proxy
variables (and pip's) at it, before the program's process exists;
egress_start then relays each connection to the socket, at most
EGRESS_MAX at once, in threads of the process that called it."""
import os
import threading

EGRESS_MAX = 64  # connections relayed at once; more wait in the listen queue
EGRESS_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy", "PIP_PROXY")


def egress_listen():
    """(listening socket, unix socket path), or None without PYBOX_EGRESS."""
    path = os.environ.pop("PYBOX_EGRESS", "")
    if not path:
        return None
    global socket
    import socket  # only here: a run without egress spares its import
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.bind(("127.0.0.1", 0))
    ls.listen(128)
    url = "http://127.0.0.1:%d" % ls.getsockname()[1]
    for k in EGRESS_VARS:
        os.environ[k] = url
    os.environ["NO_PROXY"] = os.environ["no_proxy"] = "localhost,127.0.0.1,::1"
    return ls, path


def egress_start(ls, path):
    slots = threading.BoundedSemaphore(EGRESS_MAX)
    threading.Thread(target=_egress_accept, args=(ls, path, slots), daemon=True).start()


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
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass
