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


class GracefulThreadWorker(ThreadWorker):
    """gunicorn's gthread worker, whose graceful stop (SIGTERM: the server's stop, or a HUP's old workers) serves
    every connection it has accepted.

    gunicorn 23's gthread worker leaves its loop on the stop and exits: a connection it had accepted whose request
    it had not read yet was closed unanswered, and one the kernel had queued on the listening socket was reset
    when the last copy of that socket closed. This one takes what the kernel has queued, stops listening, and
    goes on serving the connections it holds until none is left or `graceful_timeout` passes: each answers its
    next request and closes (a stopping gthread worker's answers say `Connection: close`); one that sends
    nothing closes at its keep-alive timeout as it would anyway. And the stop tells the process
    (serenity/stopping.py), so a waiting poll answers at once instead of holding the stop for its whole wait."""

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
            if not self.futures and time.monotonic() >= linger:
                break  # those left sent nothing since they were accepted or last answered
        self.tpool.shutdown(False)
        self.poller.close()
        futures.wait(self.futures, timeout=max(0.0, deadline - time.monotonic()))

    def serve_turn(self) -> None:
        """One turn of gthread's loop: the poller's events (connections to accept, requests to read), then the
        requests that finished."""
        if self.nr_conns < self.worker_connections:
            for key, _ in self.poller.select(1.0):
                key.data(key.fileobj)
            result = futures.wait(self.futures, timeout=0, return_when=futures.FIRST_COMPLETED)
        else:
            result = futures.wait(self.futures, timeout=1.0, return_when=futures.FIRST_COMPLETED)
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
            conn = TConn(self.cfg, client, addr, server)
            self.nr_conns += 1
            with self._lock:
                self.poller.register(conn.sock, selectors.EVENT_READ, partial(self.on_client_socket_readable, conn))
