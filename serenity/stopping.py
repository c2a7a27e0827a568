"""The process has been told to stop (a gunicorn worker's SIGTERM: the server's graceful stop, or the old workers of
a HUP). Requests that hold a connection open for long (the waiting poll) register here to be woken and answer at
once, so that a stop never has to wait for them, or kill them at its graceful timeout."""

import threading
from collections.abc import Callable

_stopping = threading.Event()
_callbacks: list[Callable[[], None]] = []
_lock = threading.Lock()


def is_stopping() -> bool:
    return _stopping.is_set()


def on_stop(callback: Callable[[], None]) -> None:
    """Call `callback` (from the thread that stops the process, with no lock of the caller's held) on the stop."""
    with _lock:
        _callbacks.append(callback)


def begin() -> None:
    """Mark the process as stopping and call every registered callback once. Safe from a signal handler in a
    thread that holds none of the callbacks' locks (gunicorn's main thread serves no request)."""
    with _lock:
        if _stopping.is_set():
            return
        _stopping.set()
        callbacks = list(_callbacks)
    for callback in callbacks:
        callback()


def reset() -> None:
    """Tests only: the process is running again."""
    _stopping.clear()
