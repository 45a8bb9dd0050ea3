# SPDX-License-Identifier: Apache-2.0
"""space_kernel: the code-interpreter server of a sandbox (what the E2B code-interpreter SDKs call on port 49999).

    python3 space_kernel.py            # serve on SPACE_KERNEL_HOST:SPACE_KERNEL_PORT (0.0.0.0:49999)

HTTP endpoints (no authentication here: the host's proxy checks the sandbox's access token first):

    POST   /execute               {code, context_id?, language?, env_vars?} -> 200 application/x-ndjson stream
    POST   /contexts              {language?, cwd?} -> {id, language, cwd}
    GET    /contexts              -> [{id, language, cwd}, ...]
    DELETE /contexts/{id}         -> 204
    POST   /contexts/{id}/restart -> 200 {id, language, cwd} (a fresh interpreter)
    GET    /health                -> 200 OK

Every context is one Python process (this file run with --worker FD) that keeps the namespace between
executions. It talks to the server over a socket pair in JSON lines; its file descriptors 1 and 2 are pipes
the server reads too, so output written below Python (subprocesses, C code) reaches the caller as well.
A context runs one execution at a time; others wait their turn. Restarting a context kills its process and
starts another; a process that dies during an execution (os._exit, a crash) answers an error and the next
execution starts a fresh one. A caller that goes away interrupts its execution (SIGINT: KeyboardInterrupt).

Lines of the /execute stream: {"type": "stdout"|"stderr", "text", "timestamp" (ns)}, {"type": "result",
"is_main_result", "text", "html", "png", "chart", "data", ...}, {"type": "error", "name", "value", "traceback"},
{"type": "number_of_executions", "execution_count"}; an HTTP/1.0 caller (a relay such as `space serve`'s port
proxy, which notices a caller that left only when it has something to write) also gets {"type": "keepalive"}
after SPACE_KERNEL_KEEPALIVE seconds (5) without output. The SDKs skip types they do not know.

Only the standard library is imported; numpy, pandas and matplotlib are looked at when user code imported
them (figures are drawn with the Agg backend and sent as PNG with the chart's data; a DataFrame also sends
its columns). Code written for notebooks finds display(), IPython.display (small stand-ins when IPython is not
installed), `!command` lines and `%pip`. The server starts listening before anything heavy is loaded.
"""
import json
import os
import sys
import threading
import time

PYTHON_LANGS = ("python", "python3", "py")
TEXT_CAP = 1 << 17  # characters of one stdout/stderr message: at most ~768 KiB once encoded (cap: 1 MiB)
SYNC = b"\x00\x1dspace-kernel-sync\x1d\x00"  # written on fds 1 and 2 at the end of an execution
KERNEL_FILE = os.path.abspath(__file__)
# Seconds without output after which an HTTP/1.0 answer (a relay's) gets a {"type": "keepalive"} line
KEEPALIVE = float(os.environ.get("SPACE_KERNEL_KEEPALIVE", "5") or 0)


def _line(msg):
    """One JSON line, UTF-8 (ASCII escapes if the text holds lone surrogates)."""
    try:
        return (json.dumps(msg, ensure_ascii=False, default=str) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(msg, default=str) + "\n").encode("ascii")


# ---------------------------------------------------------------------------------------------------------
# Server side
# ---------------------------------------------------------------------------------------------------------

class Worker:
    """One Python process running a context's code; its messages go to the queue of the running execution."""

    def __init__(self, cwd):
        import queue
        import socket
        import subprocess
        self.queue = queue.Queue(maxsize=32)
        self.active = False
        self.dead = False
        self.reader_done = False  # the message socket reached its end
        self.kill_reason = None
        parent, child = socket.socketpair()
        env = dict(os.environ)
        env.setdefault("MPLBACKEND", "Agg")
        env["PYTHONUNBUFFERED"] = "1"
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-u", KERNEL_FILE, "--worker", str(child.fileno())],
                pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, cwd=cwd, env=env, start_new_session=True)
        finally:
            child.close()
        self.sock = parent
        self.send_lock = threading.Lock()
        for target, args in ((self._read_messages, ()), (self._pump, (self.proc.stdout, "stdout")),
                             (self._pump, (self.proc.stderr, "stderr"))):
            threading.Thread(target=target, args=args, daemon=True).start()

    # Readers: they feed the queue while an execution runs and drop what comes between executions.
    def _put(self, item, always=False):
        import queue
        while self.active or always:
            try:
                self.queue.put(item, timeout=0.5)
                return
            except queue.Full:
                if always and not self.active:
                    return

    def _read_messages(self):
        rf = self.sock.makefile("rb")
        try:
            for raw in rf:
                try:
                    kind = json.loads(raw).get("type")
                except ValueError:
                    continue
                self._put((kind, raw))
        except OSError:
            pass
        self.dead = True
        self.reader_done = True
        self._put(("eof", None), always=True)

    def _pump(self, pipe, kind):
        import codecs
        dec = codecs.getincrementaldecoder("utf-8")("replace")
        fd = pipe.fileno()
        pend = b""
        while True:
            try:
                data = os.read(fd, 65536)
            except OSError:
                data = b""
            if not data:
                break
            pend += data
            while True:
                i = pend.find(SYNC)
                if i < 0:
                    break
                self._text(kind, dec.decode(pend[:i]))
                self._put(("sync", None))
                pend = pend[i + len(SYNC):]
            keep = 0  # a tail that may begin the marker waits for the next read
            for k in range(min(len(SYNC) - 1, len(pend)), 0, -1):
                if SYNC.startswith(pend[-k:]):
                    keep = k
                    break
            out, pend = pend[:len(pend) - keep], pend[len(pend) - keep:]
            if out:
                self._text(kind, dec.decode(out))
        pipe.close()

    def _text(self, kind, text):
        import time
        for i in range(0, len(text), TEXT_CAP):
            self._put((kind, _line({"type": kind, "text": text[i:i + TEXT_CAP], "timestamp": time.time_ns()})))

    def status(self):
        """How the process ended, in words."""
        import signal
        import subprocess
        try:
            rc = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return "stopped answering"
        if rc < 0:
            try:
                return "was killed by signal %s" % signal.Signals(-rc).name
            except ValueError:
                return "was killed by signal %d" % -rc
        return "exited with status %d" % rc

    def interrupt(self):
        import signal
        try:
            os.kill(self.proc.pid, signal.SIGINT)
        except OSError:
            pass

    def kill(self, reason=None):
        if reason and not self.kill_reason:
            self.kill_reason = reason
        self.dead = True
        try:  # the process and what it started (its own process group, unless they left it)
            import signal
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            try:
                self.proc.kill()
            except OSError:
                pass
        try:
            import socket
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        threading.Thread(target=self._reap, daemon=True).start()

    def _reap(self):
        try:
            self.proc.wait(timeout=30)
        except Exception:
            pass
        self.sock.close()

    def execute(self, code, env, emit, gone, keepalive=0):
        """Run code; emit(raw_line) each message; gone() tells the caller went away. With keepalive, a
        {"type": "keepalive"} line goes after that many seconds without output (a relay in between notices a
        caller that left only when it has something to write). Returns False when the process is lost (the
        context needs a fresh one)."""
        import queue
        import time
        while True:  # what the last execution left behind
            try:
                self.queue.get_nowait()
            except queue.Empty:
                break
        self.active = True
        try:
            with self.send_lock:
                self.sock.sendall(_line({"op": "exec", "code": code, "env": env}))
        except OSError:
            self.dead = True
        left = False  # the caller went away: interrupt, drain, answer nobody
        interrupted_at = None
        last_sigint = 0.0
        done_at = None
        syncs = 0
        last_out = time.monotonic()
        try:
            while True:
                try:
                    kind, raw = self.queue.get(timeout=0.2)
                except queue.Empty:
                    kind, raw = None, None
                now = time.monotonic()
                if kind is None and self.reader_done and self.queue.empty():
                    kind = "eof"  # (its "eof" went with what the last execution left behind)
                if kind is None:
                    if not left and gone():
                        left = True
                    if not left and keepalive and now - last_out >= keepalive:
                        last_out = now
                        try:
                            emit(_line({"type": "keepalive"}))
                        except OSError:
                            left = True
                    if left and done_at is None:
                        if interrupted_at is None:
                            interrupted_at = now
                        if now - last_sigint >= 1.0:
                            self.interrupt()
                            last_sigint = now
                        if now - interrupted_at > 5.0:  # it does not stop: a fresh process next time
                            self.kill("it did not stop when interrupted")
                            return False
                    if done_at is not None and now - done_at > 0.5:
                        return True
                    continue
                if kind == "eof":
                    if not left and done_at is None:
                        why = self.kill_reason or ("the Python process of this context %s" % self.status())
                        text = ("%s while running this code; the context's state is lost and the next "
                                "execution starts a fresh process" % why)
                        emit(_line({"type": "error", "name": "KernelDied", "value": text,
                                    "traceback": "KernelDied: " + text}))
                    self.kill()  # what it started, and its exit status
                    return False
                if kind == "done":
                    done_at = now
                    if syncs >= 2:
                        return True
                    continue
                if kind == "sync":
                    syncs += 1
                    if done_at is not None and syncs >= 2:
                        return True
                    continue
                if left:
                    continue
                last_out = now
                try:
                    emit(raw)
                except OSError:
                    left = True
        finally:
            self.active = False


class Context:
    def __init__(self, language, cwd, default=False):
        import uuid
        self.id = str(uuid.uuid4())
        self.language = language
        self.cwd = cwd
        self.default = default
        self.run_lock = threading.Lock()  # one execution at a time
        self.state_lock = threading.Lock()
        self.removed = False
        self.worker = Worker(cwd)

    def describe(self):
        return {"id": self.id, "language": self.language, "cwd": self.cwd}

    def current(self):
        with self.state_lock:
            if self.worker.dead:
                self.worker.kill()
                self.worker = Worker(self.cwd)
            return self.worker

    def restart(self):
        with self.state_lock:
            old, self.worker = self.worker, Worker(self.cwd)
        old.kill("the context was restarted")

    def remove(self):
        with self.state_lock:
            self.removed = True
            self.worker.kill("the context was removed")


class Kernel:
    def __init__(self):
        self.lock = threading.Lock()
        self.contexts = {}
        self.defaults = {}

    @staticmethod
    def default_cwd():
        for d in ("/home/user", "/root"):
            if os.path.isdir(d):
                return d
        return "/"

    def create(self, language, cwd):
        ctx = Context(language, cwd)
        with self.lock:
            self.contexts[ctx.id] = ctx
        return ctx

    def default(self, language):
        with self.lock:
            ctx = self.defaults.get(language)
            if ctx is None or ctx.removed:
                ctx = Context(language, self.default_cwd(), default=True)
                self.defaults[language] = ctx
                self.contexts[ctx.id] = ctx
            return ctx

    def get(self, cid):
        with self.lock:
            return self.contexts.get(cid)

    def remove(self, cid):
        with self.lock:
            ctx = self.contexts.pop(cid, None)
            if ctx is not None and self.defaults.get(ctx.language) is ctx:
                del self.defaults[ctx.language]
        if ctx is not None:
            ctx.remove()
        return ctx

    def shutdown(self):
        with self.lock:
            ctxs = list(self.contexts.values())
        for ctx in ctxs:
            ctx.worker.kill("the server stopped")


def python_language(lang):
    if lang is None or lang == "":
        return "python"
    if isinstance(lang, str) and lang.lower() in PYTHON_LANGS:
        return "python"
    return None


def make_handler(kernel):
    from http.server import BaseHTTPRequestHandler

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "space-kernel"

        def version_string(self):
            return self.server_version

        def log_message(self, fmt, *args):
            if os.environ.get("SPACE_KERNEL_LOG"):
                sys.stderr.write("space_kernel: %s %s\n" % (self.address_string(), fmt % args))

        # -- plumbing
        def _closing(self):
            return self.request_version == "HTTP/1.0" or self.close_connection

        def reply(self, status, body=b"", ctype="text/plain; charset=utf-8"):
            if isinstance(body, str):
                body = body.encode("utf-8")
            self.send_response(status)
            if status != 204:
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
            if self._closing():
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            if status != 204 and self.command != "HEAD":
                self.wfile.write(body)

        def reply_json(self, status, obj):
            self.reply(status, json.dumps(obj), "application/json")

        def body(self):
            """The request's JSON object ({} when empty); None after answering 400."""
            raw = b""
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass
                        break
                    raw += self.rfile.read(size)
                    self.rfile.readline()
            else:
                n = int(self.headers.get("Content-Length") or 0)
                if n > (64 << 20):
                    self.reply(413, "request body too large\n")
                    return None
                raw = self.rfile.read(n) if n > 0 else b""
            if not raw.strip():
                return {}
            try:
                obj = json.loads(raw)
            except ValueError:
                self.reply(400, "the request body is not JSON\n")
                return None
            if not isinstance(obj, dict):
                self.reply(400, "the request body must be a JSON object\n")
                return None
            return obj

        def path_parts(self):
            path = self.path.split("?", 1)[0]
            return [p for p in path.split("/") if p]

        # -- routes
        def do_GET(self):
            parts = self.path_parts()
            if parts == ["health"] or parts == []:
                return self.reply(200, "OK")
            if parts == ["contexts"]:
                with kernel.lock:
                    ctxs = list(kernel.contexts.values())
                return self.reply_json(200, [c.describe() for c in ctxs])
            if len(parts) == 2 and parts[0] == "contexts":
                ctx = kernel.get(parts[1])
                if ctx is None:
                    return self.reply(404, "context %s not found\n" % parts[1])
                return self.reply_json(200, ctx.describe())
            self.reply(404, "not found: %s\n" % self.path)

        def do_DELETE(self):
            parts = self.path_parts()
            if len(parts) == 2 and parts[0] == "contexts":
                self.body()
                if kernel.remove(parts[1]) is None:
                    return self.reply(404, "context %s not found\n" % parts[1])
                return self.reply(204)
            self.reply(404, "not found: %s\n" % self.path)

        def do_POST(self):
            parts = self.path_parts()
            req = self.body()
            if req is None:
                return
            if parts == ["execute"]:
                return self.execute(req)
            if parts == ["contexts"]:
                return self.create_context(req)
            if len(parts) == 3 and parts[0] == "contexts" and parts[2] == "restart":
                ctx = kernel.get(parts[1])
                if ctx is None:
                    return self.reply(404, "context %s not found\n" % parts[1])
                ctx.restart()
                return self.reply_json(200, ctx.describe())
            self.reply(404, "not found: %s\n" % self.path)

        def no_language(self, lang):
            self.reply(400, "language '%s' is not available in this sandbox: python only\n" % lang)

        def create_context(self, req):
            lang = python_language(req.get("language"))
            if lang is None:
                return self.no_language(req.get("language"))
            cwd = req.get("cwd") or kernel.default_cwd()
            if not isinstance(cwd, str) or not os.path.isdir(cwd):
                return self.reply(400, "cwd %r is not a directory in this sandbox\n" % (cwd,))
            try:
                ctx = kernel.create(lang, cwd)
            except OSError as e:
                return self.reply(500, "cannot start the context's Python: %s\n" % e)
            self.reply_json(200, ctx.describe())

        def caller_gone(self):
            import select
            import socket
            try:
                r, _, _ = select.select([self.connection], [], [], 0)
                if not r:
                    return False
                return self.connection.recv(1, socket.MSG_PEEK) == b""
            except (OSError, ValueError):
                return True

        def execute(self, req):
            code = req.get("code")
            if not isinstance(code, str):
                return self.reply(400, "'code' must be a string\n")
            env = req.get("env_vars") or {}
            if not isinstance(env, dict):
                return self.reply(400, "'env_vars' must be an object\n")
            env = {str(k): "" if v is None else str(v) for k, v in env.items()}
            cid = req.get("context_id")
            if cid:
                ctx = kernel.get(cid)
                if ctx is None:
                    return self.reply(404, "context %s not found\n" % cid)
            else:
                lang = python_language(req.get("language"))
                if lang is None:
                    return self.no_language(req.get("language"))
                try:
                    ctx = kernel.default(lang)
                except OSError as e:
                    return self.reply(500, "cannot start the context's Python: %s\n" % e)
            chunked = not self._closing()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-ndjson")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("X-Accel-Buffering", "no")
            if chunked:
                self.send_header("Transfer-Encoding", "chunked")
            else:  # HTTP/1.0 (or Connection: close): the body ends with the connection
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.flush()

            def emit(raw):
                if chunked:
                    raw = b"%x\r\n%s\r\n" % (len(raw), raw)
                self.wfile.write(raw)
                self.wfile.flush()

            while not ctx.run_lock.acquire(timeout=0.5):  # wait for the context's running execution
                if self.caller_gone():
                    self.close_connection = True
                    return
            try:
                if ctx.removed:
                    emit(_line({"type": "error", "name": "ContextRemoved",
                                "value": "the context was removed", "traceback": "ContextRemoved"}))
                else:
                    try:
                        w = ctx.current()
                    except OSError as e:  # its cwd went away, no memory left, ...
                        w = None
                        text = "cannot start the context's Python process: %s" % e
                        emit(_line({"type": "error", "name": "KernelDied", "value": text, "traceback": text}))
                    if w is not None:
                        w.execute(code, env, emit, self.caller_gone, 0 if chunked else KEEPALIVE)
                if chunked:
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
            except OSError:
                self.close_connection = True
            finally:
                ctx.run_lock.release()

    return Handler


def serve():
    import signal
    from http.server import ThreadingHTTPServer
    host = os.environ.get("SPACE_KERNEL_HOST", "0.0.0.0")
    port = int(os.environ.get("SPACE_KERNEL_PORT", "49999"))
    kernel = Kernel()

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        allow_reuse_address = True
        request_queue_size = 64
        if ":" in host:
            import socket
            address_family = socket.AF_INET6

    httpd = Server((host, port), make_handler(kernel))
    sys.stderr.write("space_kernel: listening on %s:%d\n" % (host, httpd.server_address[1]))
    sys.stderr.flush()
    threading.Thread(target=kernel.default, args=("python",), daemon=True).start()  # ready for the first call

    def stop(signum, frame):
        threading.Thread(target=httpd.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if os.environ.get("SPACE_KERNEL_EXIT_WITH_STDIN"):  # a test's kernel ends with the test
        def watch_stdin():
            while sys.stdin.buffer.read1(4096):
                pass
            stop(None, None)
        threading.Thread(target=watch_stdin, daemon=True).start()
    try:
        httpd.serve_forever(poll_interval=0.5)
    finally:
        kernel.shutdown()
        httpd.server_close()


# ---------------------------------------------------------------------------------------------------------
# Worker side: runs in the context's own process
# ---------------------------------------------------------------------------------------------------------

class _State:
    executing = False  # SIGINT raises KeyboardInterrupt only while user code runs
    sending = False    # ... and not in the middle of a message (it is raised right after)
    pending = False


_state = _State()
_sock = None
_send_lock = threading.Lock()
_main_ident = threading.get_ident()


def _sigint(signum, frame):
    if not _state.executing:
        return
    if _state.sending:
        _state.pending = True
        return
    raise KeyboardInterrupt


def _send(msg):
    main = threading.get_ident() == _main_ident
    data = _line(msg)
    if main:
        _state.sending = True
    try:
        with _send_lock:
            _sock.sendall(data)
    except OSError:
        os._exit(0)  # the server is gone
    finally:
        if main:
            _state.sending = False
    if main and _state.pending and _state.executing:
        _state.pending = False
        raise KeyboardInterrupt


class _Output:
    """sys.stdout / sys.stderr of user code: text goes to the server in chunks, a line as soon as it ends
    (or within 50 ms when lines come fast), a partial line within 50 ms."""
    encoding = "utf-8"
    errors = "strict"
    newlines = None
    line_buffering = True
    closed = False

    def __init__(self, kind, fd):
        self.kind = kind
        self.name = "<%s>" % kind
        self.fd = fd
        self.buf = []
        self.size = 0
        self.last = 0.0
        self.lock = threading.Lock()
        self.buffer = _BinaryOutput(self)

    def write(self, s):
        import time
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not %s" % type(s).__name__)
        if not s:
            return 0
        with self.lock:
            self.buf.append(s)
            self.size += len(s)
            now = time.monotonic()
            if self.size >= 65536 or ("\n" in s and now - self.last >= 0.05):
                self._flush_locked(now)
                return len(s)
        _flusher_wake.set()
        return len(s)

    def writelines(self, lines):
        for s in lines:
            self.write(s)

    def _flush_locked(self, now=None):
        import time
        if not self.buf:
            return
        text = "".join(self.buf)
        self.buf = []
        self.size = 0
        self.last = now if now is not None else time.monotonic()
        for i in range(0, len(text), TEXT_CAP):
            _send({"type": self.kind, "text": text[i:i + TEXT_CAP], "timestamp": time.time_ns()})

    def flush(self):
        with self.lock:
            self._flush_locked()

    def isatty(self):
        return False

    def readable(self):
        return False

    def writable(self):
        return True

    def seekable(self):
        return False

    def fileno(self):
        self.flush()
        return self.fd


class _BinaryOutput:
    def __init__(self, text):
        self.text = text

    def write(self, b):
        self.text.write(bytes(b).decode("utf-8", "replace"))
        return len(b)

    def flush(self):
        self.text.flush()

    def fileno(self):
        return self.text.fileno()


_flusher_wake = threading.Event()
_outputs = []


def _flusher():
    import time
    while True:
        _flusher_wake.wait()
        _flusher_wake.clear()
        time.sleep(0.05)
        for o in _outputs:
            try:
                o.flush()
            except Exception:
                pass


def _flush_outputs():
    for o in _outputs:
        o.flush()


def _parent_watch(ppid):
    import time
    while True:
        time.sleep(1.0)
        if os.getppid() != ppid:
            os._exit(0)


# -- representations

_MIME_KEYS = {
    "text/plain": "text", "text/html": "html", "text/markdown": "markdown", "image/svg+xml": "svg",
    "image/png": "png", "image/jpeg": "jpeg", "application/pdf": "pdf", "text/latex": "latex",
    "application/json": "json", "application/javascript": "javascript", "text/javascript": "javascript",
}
_REPR_METHODS = (("html", "_repr_html_"), ("markdown", "_repr_markdown_"), ("svg", "_repr_svg_"),
                 ("png", "_repr_png_"), ("jpeg", "_repr_jpeg_"), ("pdf", "_repr_pdf_"),
                 ("latex", "_repr_latex_"), ("json", "_repr_json_"), ("javascript", "_repr_javascript_"))
_BINARY = ("png", "jpeg", "pdf")


def _clean(v, depth=0):
    """Something json.dumps takes and JSON.parse reads: no NaN/Infinity, no odd types."""
    import math
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if v is None or isinstance(v, (str, bool, int)):
        return v
    if depth > 50:
        return str(v)
    if isinstance(v, dict):
        return {str(k): _clean(x, depth + 1) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x, depth + 1) for x in v]
    if hasattr(v, "item") and hasattr(v, "dtype"):  # a numpy scalar
        try:
            return _clean(v.item(), depth + 1)
        except Exception:
            pass
    if hasattr(v, "tolist"):
        try:
            return _clean(v.tolist(), depth + 1)
        except Exception:
            pass
    if hasattr(v, "isoformat"):
        try:
            return v.isoformat()
        except Exception:
            pass
    return str(v)


def _put_value(bundle, key, value):
    import base64
    if value is None:
        return
    if isinstance(value, tuple) and len(value) == 2:  # (data, metadata)
        value = value[0]
        if value is None:
            return
    if key in _BINARY and isinstance(value, (bytes, bytearray, memoryview)):
        value = base64.b64encode(bytes(value)).decode("ascii")
    elif isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("utf-8", "replace")
    bundle[key] = value


def _is_figure(obj):
    mpl_figure = sys.modules.get("matplotlib.figure")
    return mpl_figure is not None and isinstance(obj, mpl_figure.Figure)


def _is_dataframe(obj):
    pd = sys.modules.get("pandas")
    return pd is not None and isinstance(obj, getattr(pd, "DataFrame", ()))


def _bundle(obj):
    """The representations of obj, by the keys the SDK reads."""
    bundle = {}
    try:
        bundle["text"] = repr(obj)
    except Exception as e:
        bundle["text"] = "<%s object (repr failed: %s)>" % (type(obj).__name__, e)
    if isinstance(obj, type):
        return bundle
    if _is_figure(obj):
        bundle.update(_figure_bundle(obj))
        return bundle
    mimebundle = _method(obj, "_repr_mimebundle_")
    if mimebundle is not None:
        try:
            try:
                data = mimebundle(include=None, exclude=None)
            except TypeError:
                data = mimebundle()
            if isinstance(data, tuple):
                data = data[0]
            for mime, value in (data or {}).items():
                _put_value(bundle, _MIME_KEYS.get(mime, mime), value)
        except Exception:
            pass
    for key, name in _REPR_METHODS:
        if key in bundle:
            continue
        fn = _method(obj, name)
        if fn is None:
            continue
        try:
            _put_value(bundle, key, fn())
        except Exception:
            pass
    if _is_dataframe(obj):
        try:
            bundle["data"] = _dataframe_data(obj)
        except Exception:
            pass
    return bundle


def _method(obj, name):
    try:
        fn = getattr(obj, name, None)
    except Exception:
        return None
    return fn if callable(fn) else None


def _dataframe_data(df):
    """A DataFrame's columns: {column: [values]} (JSON values; dates as ISO strings)."""
    split = json.loads(df.to_json(orient="split", date_format="iso", default_handler=str))
    cols = [str(c) for c in split.get("columns", [])]
    rows = split.get("data", [])
    return {c: [row[i] for row in rows] for i, c in enumerate(cols)}


def _publish(obj, main):
    _flush_outputs()
    msg = {"type": "result", "is_main_result": bool(main)}
    msg.update(_clean(_bundle(obj)))
    _send(msg)


def display(*objs, raw=False, **kwargs):
    """Show each object as a result (not the cell's main one), as IPython's display() does."""
    for obj in objs:
        if raw and isinstance(obj, dict):
            _flush_outputs()
            bundle = {}
            for mime, value in obj.items():
                _put_value(bundle, _MIME_KEYS.get(mime, mime), value)
            msg = {"type": "result", "is_main_result": False}
            msg.update(_clean(bundle))
            _send(msg)
        else:
            _publish(obj, False)
            if _is_figure(obj):
                _close_figure(obj)


# -- matplotlib

def _close_figure(fig):
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None:
        try:
            plt.close(fig)
        except Exception:
            pass


def _flush_figures():
    """Send the open pyplot figures (what the cell drew) and close them."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    try:
        nums = plt.get_fignums()
    except Exception:
        return
    for num in nums:
        try:
            fig = plt.figure(num)
        except Exception:
            continue
        try:
            _publish(fig, False)
        finally:
            _close_figure(fig)


def _figure_bundle(fig):
    import base64
    import io
    out = {}
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    out["png"] = base64.b64encode(buf.getvalue()).decode("ascii")
    try:
        chart = _figure_chart(fig)
        if chart is not None:
            out["chart"] = chart
    except Exception:
        pass
    return out


class _PatchFinder:
    """Import hook: once user code imports matplotlib.pyplot, plt.show() sends the figures; a real IPython's
    display() (outside a notebook it prints) shows results here."""

    def find_spec(self, name, path, target=None):
        patch = _PATCHES.get(name)
        if patch is None:
            return None
        import importlib.machinery
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        orig = spec.loader

        class Loader:
            def create_module(self, spec):
                return orig.create_module(spec)

            def exec_module(self, module):
                module.__spec__.loader = orig
                module.__loader__ = orig
                orig.exec_module(module)
                patch(module)

        spec.loader = Loader()
        return spec

    def invalidate_caches(self):
        pass


def _patch_pyplot(plt):
    def show(*args, **kwargs):
        _flush_figures()
    show.__doc__ = plt.show.__doc__
    plt.show = show


def _patch_display(module):
    if "display" in module.__dict__:
        module.display = display


_PATCHES = {"matplotlib.pyplot": _patch_pyplot, "IPython.core.display_functions": _patch_display,
            "IPython.display": _patch_display}


# -- IPython.display, for code written for notebooks, when IPython is not installed

class _DisplayObject:
    _key = None

    def __init__(self, data=None, url=None, filename=None, metadata=None, **kwargs):
        if filename is not None and data is None:
            with open(filename, "rb") as f:
                data = f.read()
            if self._key not in _BINARY:
                data = data.decode("utf-8", "replace")
        self.data, self.url, self.filename, self.metadata = data, url, filename, metadata

    def __repr__(self):
        return "<IPython.core.display.%s object>" % type(self).__name__


def _shim_class(name, key, method):
    def rep(self):
        return self.data
    return type(name, (_DisplayObject,), {"_key": key, method: rep})


_SHIM_CLASSES = {
    "HTML": _shim_class("HTML", "html", "_repr_html_"),
    "Markdown": _shim_class("Markdown", "markdown", "_repr_markdown_"),
    "Latex": _shim_class("Latex", "latex", "_repr_latex_"),
    "Math": _shim_class("Math", "latex", "_repr_latex_"),
    "SVG": _shim_class("SVG", "svg", "_repr_svg_"),
    "Javascript": _shim_class("Javascript", "javascript", "_repr_javascript_"),
}


class _JSON(_DisplayObject):
    _key = "json"

    def _repr_json_(self):
        return json.loads(self.data) if isinstance(self.data, (str, bytes)) else self.data


class _Image(_DisplayObject):
    _key = "png"

    def __init__(self, data=None, url=None, filename=None, format=None, **kwargs):
        if isinstance(data, str) and data.startswith(("http://", "https://")) and url is None:
            data, url = None, data
        elif isinstance(data, str) and filename is None and os.path.exists(data):
            data, filename = None, data
        super().__init__(data=data, url=url, filename=filename)
        if isinstance(self.data, str):
            self.data = self.data.encode("latin-1", "replace")
        fmt = (format or os.path.splitext(filename or url or "")[1].lstrip(".") or "").lower()
        if not fmt and isinstance(self.data, (bytes, bytearray)):
            fmt = "jpeg" if bytes(self.data[:3]) == b"\xff\xd8\xff" else "png"
        self.format = "jpeg" if fmt in ("jpg", "jpeg") else fmt or "png"

    def _repr_png_(self):
        return self.data if self.format == "png" else None

    def _repr_jpeg_(self):
        return self.data if self.format == "jpeg" else None

    def _repr_html_(self):
        return '<img src="%s"/>' % self.url if self.data is None and self.url else None


_JSON.__name__ = _JSON.__qualname__ = "JSON"
_Image.__name__ = _Image.__qualname__ = "Image"


def _clear_output(wait=False):
    pass


class _ShimFinder:
    """IPython, IPython.display and IPython.core.display as small stand-ins, when IPython is not installed."""
    names = ("IPython", "IPython.display", "IPython.core", "IPython.core.display")

    def find_spec(self, name, path, target=None):
        if name not in self.names:
            return None
        import importlib.machinery
        import importlib.util
        if name == "IPython":
            if importlib.machinery.PathFinder.find_spec(name, path) is not None:
                return None  # the real one
        elif not getattr(sys.modules.get("IPython"), "__space_shim__", False):
            return None
        return importlib.util.spec_from_loader(name, self, is_package=name in ("IPython", "IPython.core"))

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        module.__space_shim__ = True
        module.display = display
        module.get_ipython = lambda: None
        if module.__name__.endswith("display"):
            for k, v in _SHIM_CLASSES.items():
                setattr(module, k, v)
            module.JSON, module.Image, module.DisplayObject = _JSON, _Image, _DisplayObject
            module.clear_output = _clear_output

    def invalidate_caches(self):
        pass


def _label_unit(label):
    import re
    m = re.search(r"[\(\[]([^\(\)\[\]]+)[\)\]]\s*$", label or "")
    return m.group(1).strip() if m else None


def _axis_kind(axis):
    """'datetime', 'categorical' or None, by the axis's unit converter."""
    try:
        conv = axis.get_converter() if hasattr(axis, "get_converter") else axis.converter
    except Exception:
        conv = None
    if conv is None:
        return None
    mod = type(conv).__module__
    if mod.endswith(".dates"):
        return "datetime"
    if mod.endswith(".category"):
        return "categorical"
    return None


def _axis_value(axis, kind, v):
    if kind == "datetime":
        try:
            import matplotlib.dates as mdates
            return mdates.num2date(float(v)).isoformat()
        except Exception:
            return v
    if kind == "categorical":
        try:
            mapping = axis.get_units()._mapping
            for k, i in mapping.items():
                if i == v:
                    return k
        except Exception:
            pass
    return _num(v)


def _num(v):
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    if f != f or f in (float("inf"), float("-inf")):
        return None
    if f.is_integer() and abs(f) < 2 ** 53:
        return int(f)
    return float("%.12g" % f)  # 1.2, not 1.2000000000000002


def _axes_info(ax):
    xl, yl = ax.get_xlabel(), ax.get_ylabel()
    return {"title": ax.get_title(), "x_label": xl, "y_label": yl,
            "x_unit": _label_unit(xl), "y_unit": _label_unit(yl)}


def _ticks(ax, which):
    axis = ax.xaxis if which == "x" else ax.yaxis
    kind = _axis_kind(axis)
    ticks = ax.get_xticks() if which == "x" else ax.get_yticks()
    labels = ax.get_xticklabels() if which == "x" else ax.get_yticklabels()
    scale = ax.get_xscale() if which == "x" else ax.get_yscale()
    return {which + "_ticks": [_axis_value(axis, kind, t) for t in ticks],
            which + "_tick_labels": [t.get_text() for t in labels],
            which + "_scale": kind or scale}


def _label(artist):
    label = artist.get_label() or ""
    return "" if label.startswith("_") else label


def _rectangle(xy):
    """(x0, x1, y0, y1) of a closed axis-aligned rectangle of 5 points, or None."""
    xy = [tuple(map(float, p)) for p in xy]
    while len(xy) > 5 and xy[-1] == xy[-2]:  # a path's CLOSEPOLY vertex
        xy.pop()
    if len(xy) != 5 or xy[0] != xy[4]:
        return None
    xs = sorted({float(p[0]) for p in xy})
    ys = sorted({float(p[1]) for p in xy})
    return (xs[0], xs[1], ys[0], ys[1]) if len(xs) == 2 and len(ys) == 2 else None


def _box_chart(ax):
    """A vertical box plot (what ax.boxplot draws: a box, a median, whiskers, caps, fliers), or None."""
    rects = []
    for ln in ax.lines:
        r = _rectangle(ln.get_xydata())
        if r is not None:
            rects.append((ln, r))
    for p in ax.patches:
        if type(p).__name__ == "PathPatch":
            r = _rectangle(p.get_path().vertices)
            if r is not None:
                rects.append((p, r))
    if not rects:
        return None
    others = [ln for ln in ax.lines if all(ln is not b for b, _ in rects)]
    used = set()
    elements = []
    for _, (x0, x1, q1, q3) in rects:
        cx = (x0 + x1) / 2
        tol = (x1 - x0) / 2 + 1e-9
        median, ys, outliers = None, [q1, q3], []
        for ln in others:
            xy = ln.get_xydata()
            if len(xy) == 0:
                used.add(id(ln))
                continue
            if any(abs(float(p[0]) - cx) > tol for p in xy):
                continue
            if ln.get_linestyle() in ("None", "none", "", " "):  # fliers: markers only
                outliers.extend(float(p[1]) for p in xy)
            elif len(xy) == 2 and float(xy[0][1]) == float(xy[1][1]) and q1 <= float(xy[0][1]) <= q3 \
                    and median is None and sorted((float(xy[0][0]), float(xy[1][0]))) == [x0, x1]:
                median = float(xy[0][1])  # across the whole box (caps are narrower)
            elif len(xy) == 2 and float(xy[0][0]) == float(xy[1][0]):  # a whisker
                ys.extend(float(p[1]) for p in xy)
            used.add(id(ln))
        if median is None:
            return None
        label = _axis_value(ax.xaxis, _axis_kind(ax.xaxis), cx)
        for t, tl in zip(ax.get_xticks(), ax.get_xticklabels()):
            if abs(t - cx) < 1e-6 and tl.get_text():
                label = tl.get_text()
        elements.append({"label": str(label), "min": _num(min(ys)), "first_quartile": _num(q1),
                         "median": _num(median), "third_quartile": _num(q3), "max": _num(max(ys)),
                         "outliers": [_num(v) for v in outliers]})
    if any(id(ln) not in used for ln in others):
        return None  # more than a box plot
    chart = {"type": "box_and_whisker"}
    chart.update(_axes_info(ax))
    chart["elements"] = elements
    return chart


def _axes_chart(ax):
    from matplotlib.collections import PathCollection
    from matplotlib.container import BarContainer
    from matplotlib.patches import Rectangle, Wedge
    wedges = [p for p in ax.patches if isinstance(p, Wedge)]
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    scatters = [c for c in ax.collections if isinstance(c, PathCollection)]
    lines = [ln for ln in ax.lines if not _label(ln).startswith("_")]
    if wedges and not bars and not lines:
        return {"type": "pie", "title": ax.get_title(),
                "elements": [{"label": _label(w), "angle": _num(w.theta2 - w.theta1), "radius": _num(w.r)}
                             for w in wedges]}
    box = _box_chart(ax) if not bars else None
    if box is not None:
        return box
    if bars:
        chart = {"type": "bar"}
        chart.update(_axes_info(ax))
        elements = []
        for c in bars:
            vertical = getattr(c, "orientation", "vertical") != "horizontal"
            axis = ax.xaxis if vertical else ax.yaxis
            kind = _axis_kind(axis)
            ticks = list(ax.get_xticks() if vertical else ax.get_yticks())
            tick_labels = [t.get_text() for t in (ax.get_xticklabels() if vertical else ax.get_yticklabels())]
            for rect in c.patches:
                if not isinstance(rect, Rectangle):
                    continue
                pos = rect.get_x() + rect.get_width() / 2 if vertical else rect.get_y() + rect.get_height() / 2
                value = rect.get_height() if vertical else rect.get_width()
                if kind == "categorical":
                    label = _axis_value(axis, kind, round(pos))
                else:  # a tick's own words (set_xticks(..., labels)) or the bar's place
                    label = _axis_value(axis, kind, pos)
                    for t, tl in zip(ticks, tick_labels):
                        if abs(t - pos) < 1e-6 and tl and _num(tl.replace("\u2212", "-")) == tl:
                            label = tl
                            break
                elements.append({"label": str(label), "group": _label(c), "value": _num(value)})
        chart["elements"] = elements
        return chart
    if scatters and not lines or lines and not scatters:
        chart = {"type": "scatter" if scatters else "line"}
        chart.update(_axes_info(ax))
        chart.update(_ticks(ax, "x"))
        chart.update(_ticks(ax, "y"))
        xk, yk = _axis_kind(ax.xaxis), _axis_kind(ax.yaxis)
        elements = []
        for art in (scatters or lines):
            data = art.get_offsets() if scatters else art.get_xydata()
            points = [[_axis_value(ax.xaxis, xk, p[0]), _axis_value(ax.yaxis, yk, p[1])] for p in data]
            elements.append({"label": _label(art), "points": points})
        chart["elements"] = elements
        return chart
    return {"type": "unknown", "title": ax.get_title(), "elements": []}


def _figure_chart(fig):
    axes = [ax for ax in fig.axes if ax.get_visible() and ax.get_label() != "<colorbar>"]
    if not axes:
        return None
    charts = [_axes_chart(ax) for ax in axes]
    if len(charts) == 1:
        return charts[0]
    title = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) is not None else ""
    return {"type": "superchart", "title": title, "elements": charts}


# -- running a cell

_CELL_PREFIX = "<cell-"


def _cell_name(n):
    return "%s%d>" % (_CELL_PREFIX, n)


def _cell_number(filename):
    if filename.startswith(_CELL_PREFIX) and filename.endswith(">"):
        return filename[len(_CELL_PREFIX):-1]
    return None


def _ends_with_semicolon(src):
    import io
    import tokenize
    last = None
    try:
        for tok in tokenize.generate_tokens(io.StringIO(src).readline):
            if tok.type not in (tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT, tokenize.ENDMARKER,
                                tokenize.INDENT, tokenize.DEDENT):
                last = tok
    except (tokenize.TokenError, SyntaxError):
        return False
    return last is not None and last.type == tokenize.OP and last.string == ";"


def _shell_lines(src):
    """IPython's `!cmd` and `%pip ...` lines as calls (only tried when the code is not Python as it is)."""
    import re
    out = []
    changed = False
    for line in src.split("\n"):
        m = re.match(r"^(\s*)!(.*)$", line)
        if m:
            out.append("%s__space_shell__(%r)" % (m.group(1), m.group(2)))
            changed = True
            continue
        m = re.match(r"^(\s*)%(pip|conda)\s+(.*)$", line)
        if m:
            cmd = ("%s -m pip %s" % (sys.executable, m.group(3))) if m.group(2) == "pip" else \
                "conda " + m.group(3)
            out.append("%s__space_shell__(%r)" % (m.group(1), cmd))
            changed = True
            continue
        out.append(line)
    return "\n".join(out) if changed else None


def __space_shell__(cmd):
    """Run a shell command, its output going to the cell's stdout as it comes."""
    import subprocess
    _flush_outputs()
    p = subprocess.Popen(cmd, shell=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL)
    try:
        while True:
            chunk = p.stdout.read1(65536) if hasattr(p.stdout, "read1") else p.stdout.read(65536)
            if not chunk:
                break
            sys.stdout.write(chunk.decode("utf-8", "replace"))
    except KeyboardInterrupt:
        p.kill()
        raise
    finally:
        p.wait()
        p.stdout.close()


class _Cell:
    def __init__(self):
        import types
        mod = types.ModuleType("__main__", None)
        mod.__builtins__ = __builtins__ if isinstance(__builtins__, dict) else __builtins__.__dict__
        sys.modules["__main__"] = mod
        self.ns = mod.__dict__
        self.count = 0
        self.loop = None

    def _run(self, code):
        import inspect
        result = eval(code, self.ns)
        if code.co_flags & inspect.CO_COROUTINE:
            import asyncio
            if self.loop is None or self.loop.is_closed():
                self.loop = asyncio.new_event_loop()
            result = self.loop.run_until_complete(result)
        return result

    def run(self, src, n):
        import ast
        import linecache
        filename = _cell_name(n)
        linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
        try:
            tree = ast.parse(src, filename, "exec")
        except SyntaxError:
            shelled = _shell_lines(src)
            if shelled is None:
                raise
            tree = ast.parse(shelled, filename, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr) and not _ends_with_semicolon(src):
            last = ast.Expression(tree.body.pop().value)
        flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        body = compile(tree, filename, "exec", flags=flags, dont_inherit=True)
        expr = compile(last, filename, "eval", flags=flags, dont_inherit=True) if last is not None else None
        self._run(body)
        if expr is not None:
            value = self._run(expr)
            if value is not None:
                self.ns["_"] = value
                _publish(value, True)
                if _is_figure(value):
                    _close_figure(value)


def _format_error(exc):
    import linecache
    import re
    import traceback
    parts = []
    seen = set()

    def one(e):
        out = []
        frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename != KERNEL_FILE]
        if frames or not isinstance(e, SyntaxError):
            out.append("-" * 75)
            out.append("%-42sTraceback (most recent call last)" % type(e).__name__)
        for fr in frames:
            cell = _cell_number(fr.filename)
            if cell is not None:
                head = "Cell In[%s], line %s" % (cell, fr.lineno)
                if fr.name != "<module>":
                    head += ", in %s" % fr.name
            else:
                head = "File %s:%s, in %s" % (fr.filename, fr.lineno, fr.name)
            out.append(head)
            lines = linecache.getlines(fr.filename)
            if lines and fr.lineno:
                lo, hi = max(1, fr.lineno - 2), min(len(lines), fr.lineno + 2)
                width = len(str(hi))
                for i in range(lo, hi + 1):
                    mark = "----> " if i == fr.lineno else "      "
                    out.append("%s%*d %s" % (mark, width, i, lines[i - 1].rstrip("\r\n")))
            out.append("")
        tail = "".join(traceback.format_exception_only(type(e), e))
        tail = re.sub(r'File "%s(\d+)>", line' % re.escape(_CELL_PREFIX), r"Cell In[\1], line", tail)
        out.append(tail.rstrip("\n"))
        return "\n".join(out)

    def chain(e):
        seen.add(id(e))
        cause, context = e.__cause__, e.__context__
        if cause is not None and id(cause) not in seen:
            chain(cause)
            parts.append("\nThe above exception was the direct cause of the following exception:\n")
        elif context is not None and not e.__suppress_context__ and id(context) not in seen:
            chain(context)
            parts.append("\nDuring handling of the above exception, another exception occurred:\n")
        parts.append(one(e))

    chain(exc)
    return "\n".join(parts)


def _apply_env(env):
    saved = {}
    for k, v in env.items():
        saved[k] = os.environ.get(k)
        os.environ[k] = v
    return saved


def _restore_env(saved):
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def worker(fd):
    import builtins
    import signal
    import socket
    global _sock
    _sock = socket.socket(fileno=fd)
    signal.signal(signal.SIGINT, _sigint)
    sys.path[0:1] = [""]
    sys.argv = [""]
    out, err = _Output("stdout", 1), _Output("stderr", 2)
    _outputs.extend((out, err))
    sys.stdout, sys.stderr = out, err
    sys.meta_path.insert(0, _PatchFinder())
    sys.meta_path.append(_ShimFinder())
    builtins.display = display
    builtins.__space_shell__ = __space_shell__
    threading.Thread(target=_flusher, daemon=True).start()
    threading.Thread(target=_parent_watch, args=(os.getppid(),), daemon=True).start()
    cell = _Cell()
    rf = _sock.makefile("rb")
    while True:
        raw = rf.readline()
        if not raw:
            os._exit(0)
        try:
            cmd = json.loads(raw)
        except ValueError:
            continue
        if cmd.get("op") != "exec":
            continue
        cell.count += 1
        saved = _apply_env(cmd.get("env") or {})
        _state.pending = False
        _state.executing = True
        try:
            try:
                cell.run(cmd.get("code") or "", cell.count)
            except BaseException as e:  # noqa: B036: user code's errors, SystemExit and KeyboardInterrupt too
                _flush_outputs()
                try:
                    _send({"type": "error", "name": type(e).__name__, "value": str(e),
                           "traceback": _format_error(e)})
                except KeyboardInterrupt:
                    pass
            try:
                _flush_figures()
            except BaseException as e:
                _send({"type": "stderr", "text": "could not send the figures: %s: %s\n" % (type(e).__name__, e)})
        except KeyboardInterrupt:
            pass
        finally:
            _state.executing = False
            _restore_env(saved)
            try:
                _flush_outputs()
            except BaseException:
                pass
        for f in (1, 2):
            try:
                os.write(f, SYNC)
            except OSError:
                pass
        _send({"type": "number_of_executions", "execution_count": cell.count})
        _send({"type": "done"})


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        worker(int(sys.argv[2]))
    else:
        serve()
