"""gunicorn's configuration for the API (`gunicorn -c python:serenity.gunicorn serenity.wsgi`).

Besides the server's settings, it makes gunicorn's own error answers problem+json like every other answer
of the API. A request gunicorn refuses before Django sees it (an over-long request line, too many or too
large headers, a malformed request) was answered with an HTML page; gunicorn has no hook for that body, so
its one writer of those pages, `gunicorn.util.write_error`, is replaced here. And every line gunicorn itself
logs (its error log and the access log, whose request line carries the query string) goes through the
product's scrubber and is written as JSON like every other line.
"""

import json
import os

from gunicorn import glogging, util

from serenity.logging import ContextFilter, JsonFormatter, RedactingFilter

bind = f"0.0.0.0:{os.environ.get('PORT', '8000')}"
worker_class = "gthread"
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
# Threads for ordinary requests, plus one for each waiting poll a process may hold (POLL_WAIT_MAX_WAITERS, the
# same default as serenity/settings/jobs.py): a waiter sleeps on an event holding no database connection, and a
# waiter beyond that many answers at once, so waiters never take the threads ordinary requests run on. Threads
# are made as requests need them; docs/api.md "Waiting for a change" has the figures.
WAIT_THREADS = int(os.environ.get("POLL_WAIT_MAX_WAITERS", "640"))
threads = int(os.environ.get("GUNICORN_THREADS", "8")) + WAIT_THREADS
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "60"))
graceful_timeout = 30
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
