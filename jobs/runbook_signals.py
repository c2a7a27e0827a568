"""Ctrl-C and SIGTERM in the runbook commands: an interrupt unwinds the command like Ctrl-C, so every context
manager on the way out runs (a DLQ scan releases the messages it holds), and the command exits 130.

Two things make that dependable, not merely likely:

- A step that must not be cut in half runs inside `deferred()`: one SQS receive and the bookkeeping of what it
  returned (otherwise messages SQS handed over are held, unknown to the command, for the whole hold), one
  delete, the release of held messages. An interrupt arriving meanwhile takes effect when the block ends.
- Once an interrupt has been raised, further ones are ignored: the command is already on its way out, and a
  second SIGTERM must neither cut the release short nor end the process with the signal's own status (143).

The handler is installed by the runbook commands only (`install`); elsewhere (the admin's DLQ read in a web
process, a worker) `deferred()` does nothing. Signal handlers run in the main thread, so only the main thread
defers.
"""

import signal
import threading
from collections.abc import Callable
from types import FrameType, TracebackType

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class _State:
    def __init__(self) -> None:
        self.installed = False
        self.depth = 0  # nested deferred() blocks in the main thread
        self.pending: str | None = None  # the signal that arrived inside a deferred() block
        self.raised = False  # an interrupt was raised: the command is on its way out


_state = _State()


def _interrupt(name: str) -> None:
    _state.raised = True
    raise KeyboardInterrupt(name)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    if _state.raised:
        return  # already unwinding: let the release finish and the command exit 130
    name = signal.Signals(signum).name
    if _state.depth:
        _state.pending = name
        return
    _interrupt(name)


def install() -> Callable[[], None]:
    """Route SIGINT and SIGTERM to this module (main thread only). Returns a function that puts the previous
    handlers back; a second install while one is active changes nothing and returns a no-op."""
    if _state.installed or threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = {sig: signal.signal(sig, _on_signal) for sig in SIGNALS}
    _state.installed, _state.depth, _state.pending, _state.raised = True, 0, None, False

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _state.installed, _state.depth, _state.pending, _state.raised = False, 0, None, False

    return restore


def settle() -> None:
    """The command's work is done (its last line written): from now on an interrupt is ignored, and the command
    exits with its own code, not 130."""
    if not _state.installed or threading.current_thread() is not threading.main_thread():
        return
    _state.raised, _state.pending = True, None
    # Ignored by the process itself, not only by this module: Python puts the default handlers back while the
    # interpreter shuts down, and a signal then would still end the process with 143.
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


class deferred:  # lower case: used like a function, `with runbook_signals.deferred():`
    """A block an interrupt does not cut: a signal arriving inside it is raised when the block ends (unless an
    exception already leaves the block, which ends the command anyway)."""

    def __enter__(self) -> None:
        self._counted = _state.installed and threading.current_thread() is threading.main_thread()
        if self._counted:
            _state.depth += 1

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if not self._counted:
            return
        _state.depth -= 1
        if _state.depth == 0 and _state.pending and not _state.raised:
            name, _state.pending = _state.pending, None
            if exc_type is None:
                _interrupt(name)
            _state.raised = True
