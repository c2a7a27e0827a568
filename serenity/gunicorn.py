"""gunicorn's configuration for the API (`gunicorn -c python:serenity.gunicorn serenity.wsgi`).

Besides the server's settings, it makes gunicorn's own error answers problem+json like every other answer
of the API. A request gunicorn refuses before Django sees it (an over-long request line, too many or too
large headers, a malformed request) was answered with an HTML page; gunicorn has no hook for that body, so
its one writer of those pages, `gunicorn.util.write_error`, is replaced here. And every line gunicorn itself
logs (its error log and the access log, whose request line carries the query string) goes through the
product's scrubber and is written as JSON like every other line.
"""

import errno
import json
import os
import re
import selectors
import time
from concurrent import futures
from functools import partial

from gunicorn import glogging, util
from gunicorn.workers.gthread import TConn, ThreadWorker

from serenity import stopping
from serenity.logging import ContextFilter, JsonFormatter, RedactingFilter

bind = f"0.0.0.0:{os.environ.get('PORT', '8000')}"
worker_class = "serenity.gunicorn.GracefulThreadWorker"  # gunicorn's gthread, stopping without a drop (below)
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
# Threads for ordinary requests, plus one for each waiting poll a process may hold (POLL_WAIT_MAX_WAITERS, the
# same default as serenity/settings/jobs.py): a waiter sleeps on an event holding no database connection, and a
# waiter beyond that many answers at once, so waiters never take the threads ordinary requests run on. Threads
# are made as requests need them; docs/api.md "Waiting for a change" has the figures.
WAIT_THREADS = int(os.environ.get("POLL_WAIT_MAX_WAITERS", "640"))
threads = int(os.environ.get("GUNICORN_THREADS", "8")) + WAIT_THREADS
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "60"))
# How long a stopping worker (TERM, or the old workers of a HUP) may finish the requests it holds before the
# master kills it; under the container's stop grace period (docker/compose.yaml) and above the request deadline.
graceful_timeout = int(os.environ.get("GUNICORN_GRACEFUL_TIMEOUT", "30"))
# How long a connection has to send a whole request (its head and its body) from its accept, or from its first
# byte after a kept-alive answer: this worker reads requests in its event loop and gives a thread only a whole
# one, so a client that sends part of a request and then nothing costs a socket, never a thread, and its socket
# is closed at this deadline (GracefulThreadWorker below; docs/operations.md "Slow clients").
request_read_timeout = float(os.environ.get("GUNICORN_REQUEST_READ_TIMEOUT", "10"))
accesslog = "-"
logger_class = "serenity.gunicorn.ScrubbedLogger"
# Our requests are small: a long request line or header block is a mistake or an attack.
limit_request_line = 4094
limit_request_fields = 100
limit_request_field_size = 8190

TYPE_BASE = "https://errors.serenity.example/"
CODES = {
    400: "bad_request",
    403: "forbidden",
    431: "request_header_fields_too_large",
    500: "internal_error",
    501: "not_implemented",
}


def write_problem(sock, status_int, reason, mesg):
    """gunicorn's error answer as RFC 9457 problem details (the message never echoes the request)."""
    code = CODES.get(int(status_int), "bad_request")
    body = json.dumps(
        {"type": TYPE_BASE + code.replace("_", "-"), "title": reason, "status": int(status_int), "code": code}
    ).encode()
    head = (
        f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\nContent-Type: application/problem+json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode("latin1")
    util.write_nonblock(sock, head + body)


util.write_error = write_problem


class ScrubbedLogger(glogging.Logger):
    """gunicorn's logger, each of its handlers behind the scrubber every other log line goes through."""

    def setup(self, cfg):
        super().setup(cfg)
        for log in (self.error_log, self.access_log):
            for handler in log.handlers:
                handler.addFilter(ContextFilter())
                handler.addFilter(RedactingFilter())
                handler.setFormatter(JsonFormatter())


# What the event loop buffers before a thread takes a request: a head longer than this goes to the thread at once
# (gunicorn's parser refuses it: limit_request_line, _fields, _field_size), and so does a body longer than this
# once its head is whole (the thread reads the rest, under the same deadline as a socket timeout). The API's
# bodies are small JSON documents.
HEAD_BUFFER_MAX = 64 * 1024
BODY_BUFFER_MAX = 1024 * 1024
_CONTENT_LENGTH = re.compile(rb"\r?\ncontent-length[ \t]*:[ \t]*([0-9]{1,12})[ \t]*\r?(?=\n)", re.IGNORECASE)
_EXPECT_CONTINUE = re.compile(rb"\r?\nexpect[ \t]*:[ \t]*100-continue", re.IGNORECASE)
_CHUNKED = re.compile(rb"\r?\ntransfer-encoding[ \t]*:[^\n]*chunked", re.IGNORECASE)


def request_buffered(data: bytes | bytearray) -> bool:
    """Whether `data` holds a whole request for gunicorn's parser (its head and, by Content-Length, its body), or
    as much of one as the loop buffers; the parser decides everything else (a malformed head is its 400)."""
    end, sep = data.find(b"\r\n\r\n"), 4
    if end < 0:
        end, sep = data.find(b"\n\n"), 2
    if end < 0:
        return len(data) > HEAD_BUFFER_MAX
    head, body = bytes(data[: end + sep]), len(data) - end - sep
    if _EXPECT_CONTINUE.search(head):
        return (
            True  # the client sends its body after gunicorn's `100 Continue`: the thread reads it, under the deadline
        )
    if _CHUNKED.search(head):
        return body >= BODY_BUFFER_MAX or data.endswith(b"0\r\n\r\n")
    length = _CONTENT_LENGTH.search(head)
    return length is None or body >= min(int(length.group(1)), BODY_BUFFER_MAX)


class GracefulThreadWorker(ThreadWorker):
    """gunicorn's gthread worker, whose graceful stop (SIGTERM: the server's stop, or a HUP's old workers) serves
    every connection it has accepted.

    gunicorn 23's gthread worker leaves its loop on the stop and exits: a connection it had accepted whose request
    it had not read yet was closed unanswered, and one the kernel had queued on the listening socket was reset
    when the last copy of that socket closed. This one takes what the kernel has queued, stops listening, and
    goes on serving the connections it holds until none is left or `graceful_timeout` passes: each answers its
    next request and closes (a stopping gthread worker's answers say `Connection: close`); one that sends
    nothing closes at its keep-alive timeout as it would anyway. And the stop tells the process
    (serenity/stopping.py), so a waiting poll answers at once instead of holding the stop for its whole wait.

    And it reads requests in its event loop. gthread gives a connection to a thread as soon as its first byte
    arrives, and the thread then blocks reading the rest: a client that sent part of a request head and then
    nothing held a thread for as long as it kept the socket open (with no deadline, forever), so a few
    thousand such connections took every thread and another tenant's requests waited behind them. Here the
    loop reads what each connection sends without blocking and buffers it; a thread gets the connection only
    once a whole request is buffered (`request_buffered`), and a connection that has not sent one within
    `request_read_timeout` of its accept (or of its first byte after a kept-alive answer) is closed by the loop.
    Whatever a thread still reads from the socket (a body beyond BODY_BUFFER_MAX) is bounded by the same
    timeout."""

    def init_process(self):
        # Connections reading a request, oldest deadline first (one timeout for all: insertion order is deadline
        # order); only the event loop's thread touches it.
        self.reading: dict[TConn, float] = {}
        super().init_process()

    def accept(self, server, listener):
        try:
            client, addr = listener.accept()
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        self.take(TConn(self.cfg, client, addr, server))

    def take(self, conn: TConn) -> None:
        """A connection just accepted: read in the loop until it has sent a request, or until its deadline."""
        self.nr_conns += 1
        conn.pending = bytearray()
        self.reading[conn] = time.monotonic() + request_read_timeout
        with self._lock:
            self.poller.register(conn.sock, selectors.EVENT_READ, partial(self.on_client_socket_readable, conn))

    def on_client_socket_readable(self, conn, client):
        if self.cfg.is_ssl:  # TLS ends at the load balancer; a TLS listener keeps gthread's reading
            super().on_client_socket_readable(conn, client)
            return
        try:
            data = conn.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if conn not in self.reading:
            # A kept-alive connection's next request begins: its read deadline starts now.
            with self._lock:
                try:
                    self._keep.remove(conn)
                except ValueError:
                    return  # closed by the keep-alive sweep meanwhile
            conn.pending = bytearray()
            self.reading[conn] = time.monotonic() + request_read_timeout
        if not data:  # the client closed (or reset) before a whole request
            self.drop(conn)
            return
        conn.pending += data
        if not request_buffered(conn.pending):
            return
        del self.reading[conn]
        with self._lock:
            self.poller.unregister(client)
        buffered, conn.pending = bytes(conn.pending), None
        conn.init()
        conn.parser.unreader.unread(buffered)
        conn.sock.settimeout(request_read_timeout)
        self._wrap_future(self.tpool.submit(self.handle, conn), conn)

    def drop(self, conn: TConn) -> None:
        self.reading.pop(conn, None)
        with self._lock:
            try:
                self.poller.unregister(conn.sock)
            except (KeyError, ValueError, OSError):
                pass
        self.nr_conns -= 1
        conn.close()

    def murder_slow_readers(self) -> None:
        """Close every connection whose request is not whole by its deadline."""
        now = time.monotonic()
        for conn, deadline in list(self.reading.items()):
            if deadline > now:
                break
            self.drop(conn)

    def handle_exit(self, sig, frame):
        super().handle_exit(sig, frame)
        stopping.begin()

    def run(self):
        listening = {}
        for sock in self.sockets:
            sock.setblocking(False)
            # Captured once: the listener's name may be unavailable in a handler during the stop.
            listening[sock] = server = sock.getsockname()
            self.poller.register(sock, selectors.EVENT_READ, partial(self.accept, server))
        while self.alive:
            self.notify()
            self.serve_turn()
            if not self.is_parent_alive():
                break
            self.murder_keepalived()
            self.murder_slow_readers()

        deadline = time.monotonic() + self.cfg.graceful_timeout
        for sock, server in listening.items():
            self.poller.unregister(sock)
            self.accept_queued(sock, server)
            sock.close()  # the master keeps its own copy on a HUP, for the new workers
        linger = time.monotonic() + self.cfg.keepalive
        while self.nr_conns > 0 and time.monotonic() < deadline:
            self.notify()
            self.serve_turn()
            self.murder_keepalived()
            self.murder_slow_readers()
            if not self.futures and time.monotonic() >= linger:
                break  # those left sent nothing since they were accepted or last answered
        self.tpool.shutdown(False)
        self.poller.close()
        futures.wait(self.futures, timeout=max(0.0, deadline - time.monotonic()))

    def serve_turn(self) -> None:
        """One turn of gthread's loop: the poller's events (connections to accept, requests to read), then the
        requests that finished. It waits at most a second, and no later than the next read deadline."""
        wait = 1.0
        if self.reading:
            wait = min(wait, max(0.0, next(iter(self.reading.values())) - time.monotonic()))
        if self.nr_conns < self.worker_connections:
            for key, _ in self.poller.select(wait):
                key.data(key.fileobj)
            result = futures.wait(self.futures, timeout=0, return_when=futures.FIRST_COMPLETED)
        else:
            result = futures.wait(self.futures, timeout=wait, return_when=futures.FIRST_COMPLETED)
        for fut in result.done:
            self.futures.remove(fut)

    def accept_queued(self, sock, server) -> None:
        """Accept every connection the kernel has queued on a listening socket (gthread's `accept`, until none)."""
        while True:
            try:
                client, addr = sock.accept()
            except OSError as exc:
                if exc.errno == errno.ECONNABORTED:
                    continue
                if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                    return
                raise
            self.take(TConn(self.cfg, client, addr, server))
