"""What every runbook command shares: dry run unless `--apply`, the narrowing filters, duration and id
parsing, the one-line-per-object report with a summary, and the exit code an operator's script reads:

- 0: nothing needs a human (nothing found, or everything found was acted on);
- 1: something does (a dry run found work, an item was skipped, a finding remains, a job was not found), or
  the database or SQS could not be reached (one line on stderr, no traceback);
- 2: the command was called wrongly (a usage error);
- 130: interrupted (Ctrl-C or SIGTERM) before its work was done, from the first line of `manage.py` on
  (start-up included): held DLQ messages are released on the way out, and a second signal meanwhile is
  ignored rather than cutting the release short (jobs/runbook_signals.py). A signal after the work is done (its
  last line written) changes nothing: the command exits with its own code.

A reader that stops reading (`| head`) ends nothing: the rest of the output is dropped, the command finishes
what it does, and it exits with its own code, without a BrokenPipeError traceback.
"""

import getpass
import os
import re
import sys
import uuid
from collections.abc import Iterable
from datetime import timedelta
from typing import Any, TextIO

from botocore.exceptions import BotoCoreError, ClientError
from django.core.management.base import BaseCommand, CommandError, CommandParser, OutputWrapper
from django.db import DatabaseError
from django.utils import timezone

from jobs import runbook_signals
from jobs.codes import ERROR_CODE
from jobs.models import AsyncJob, JobStatus
from jobs.selectors import JobFilter

_DURATION = re.compile(r"^\s*(\d+)\s*([smhd])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


class UsageError(CommandError):
    """The command was called wrongly: exit code 2."""

    def __init__(self, message: str):
        super().__init__(message, returncode=2)


def parse_duration(value: str) -> timedelta:
    """`45s`, `30m`, `2h`, `1d` -> timedelta. Raises UsageError."""
    match = _DURATION.match(value or "")
    if not match:
        raise UsageError(f"--older-than must look like 45s, 30m, 2h or 1d (got {value!r}).")
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


def duration_text(seconds: int) -> str:
    """The shortest exact `--older-than` spelling of `seconds`: 30s, 90s, 30m, 2h, 1d."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def parse_job_id(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value.strip())
    except (ValueError, AttributeError):
        raise UsageError(f"--job must be a job id (a UUID), got {value!r}.") from None


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else "no detail"


class QuietPipe:
    """A stream whose reader may go away (`| head`): from the first broken pipe on, what is written is dropped,
    and the process's own stdout is pointed at /dev/null, so that its final flush cannot fail either."""

    def __init__(self, out: TextIO):
        self._out = out
        self.broken = False

    def _guard(self, write: Any, *args: Any) -> Any:
        if self.broken:
            return None
        try:
            return write(*args)
        except BrokenPipeError:
            self.broken = True
            try:
                os.dup2(os.open(os.devnull, os.O_WRONLY), self._out.fileno())
            except (OSError, ValueError):  # not a real file descriptor: nothing left to flush into a pipe
                pass
            return None

    def write(self, text: str) -> Any:
        return self._guard(self._out.write, text)

    def flush(self) -> None:
        self._guard(self._out.flush)

    def isatty(self) -> bool:
        return self._out.isatty()


def cli_actor() -> str:
    """Who a runbook command acts as, for the job history: `cli:<os user>`."""
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):  # containers often run as a uid with no passwd entry
        return "cli:unknown"


class RunbookCommand(BaseCommand):
    """Subclasses set `filters` (which of job / older_than / status / code they accept), the
    `--older-than` meaning and default, and implement `run(options)`."""

    mutates = True
    filters: tuple[str, ...] = ("job",)
    older_than_help = "only objects older than this (45s, 30m, 2h, 1d)"
    older_than_default: str | None = None

    def add_arguments(self, parser: CommandParser) -> None:
        if self.mutates:
            parser.add_argument(
                "--apply", action="store_true", help="act; without it this is a dry run that changes nothing"
            )
        if "job" in self.filters:
            parser.add_argument(
                "--job", action="append", default=[], metavar="JOB_ID", help="only this job (repeat for several)"
            )
        if "older_than" in self.filters:
            default = f" (default {self.older_than_default})" if self.older_than_default else ""
            parser.add_argument(
                "--older-than", default=self.older_than_default, metavar="AGE", help=self.older_than_help + default
            )
        if "status" in self.filters:
            parser.add_argument("--status", choices=[s.value for s in JobStatus], help="only jobs in this status")
        if "code" in self.filters:
            parser.add_argument("--code", help="only jobs with this error code")

    def run_from_argv(self, argv: list[str]) -> None:
        """From the shell: interrupts are routed for the whole life of the process (never handed back to the
        default, which would end it with 143), and an interrupt outside `execute` (argument parsing, the
        closing of connections) exits 130 too."""
        runbook_signals.install()
        try:
            super().run_from_argv(argv)
        except KeyboardInterrupt:
            self.stderr.write(f"{self._name()}: interrupted; nothing more was done.")
            sys.exit(130)

    def execute(self, *args: Any, **options: Any) -> Any:
        """Run, then exit with the code the module docstring describes."""
        self.needs_attention = False
        self.missing = 0  # named objects that do not exist (`report_missing`)
        if not options.get("stdout"):
            # OutputWrapper uses write, flush and isatty alone, which QuietPipe has; the stub asks for a whole TextIO.
            self.stdout = OutputWrapper(QuietPipe(sys.stdout))  # type: ignore[arg-type]
        # SIGTERM unwinds like Ctrl-C, so context managers exit (a DLQ scan releases what it holds). Signal
        # handlers can only be set from the main thread; elsewhere the default stays.
        restore = runbook_signals.install()
        try:
            output = super().execute(*args, **options)
            self.stdout.flush()
            runbook_signals.settle()  # done: a signal from here on changes nothing, the exit code stays the command's
        except KeyboardInterrupt:
            self.stderr.write(f"{self._name()}: interrupted; nothing more was done.")
            sys.exit(130)
        except DatabaseError as exc:
            self.stderr.write(
                f"{self._name()}: the database cannot be reached or answered an error "
                f"({type(exc).__name__}: {_first_line(exc)})"
            )
            sys.exit(1)
        except BotoCoreError as exc:
            self.stderr.write(f"{self._name()}: SQS cannot be reached ({type(exc).__name__})")
            sys.exit(1)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "unknown")
            self.stderr.write(
                f"{self._name()}: SQS refused the request ({code}); check the queue URLs and the credentials"
            )
            sys.exit(1)
        finally:
            restore()
        if self.needs_attention:
            sys.exit(1)
        return output

    def _name(self) -> str:
        return self.__class__.__module__.rsplit(".", 1)[-1]

    def handle(self, *args: str, **options: Any) -> None:
        self.apply = bool(options.get("apply"))
        self.now = timezone.now()
        self.actor = cli_actor()
        self.run(options)

    def run(self, options: dict[str, Any]) -> None:
        raise NotImplementedError

    # -- parsing ------------------------------------------------------------------------------------------
    def job_filter(self, options: dict[str, Any]) -> JobFilter:
        code = options.get("code")
        if code is not None and not ERROR_CODE.match(code):
            raise UsageError(f"--code must be an error code like NEEDS_REAUTH, got {code!r}.")
        return JobFilter(
            job_ids=tuple(parse_job_id(j) for j in options.get("job") or ()), status=options.get("status"), code=code
        )

    def report_missing(self, filters: JobFilter, *, found: Iterable[object] = ()) -> None:
        """One line, and exit 1, for each job named with --job that does not exist (unless in `found`, e.g.
        a job some DLQ message still names)."""
        named = {str(j) for j in filters.job_ids}
        known = {str(j) for j in AsyncJob.objects.filter(id__in=filters.job_ids).values_list("id", flat=True)}
        for job_id in sorted(named - known - {str(j) for j in found}):
            self.needs_attention = True
            self.missing += 1
            self.stdout.write(f"job {job_id}  not found (purged after expiry, or never created)")

    def older_than(self, options: dict[str, Any]) -> timedelta:
        value = options.get("older_than")
        return parse_duration(value) if value else timedelta(0)

    # -- output -------------------------------------------------------------------------------------------
    def item(self, subject: object, action: str, detail: str = "", done: bool | None = None, why_not: str = "") -> None:
        """One line per object: `<subject>  <action>  <detail>  [dry run | done | skipped: why]`."""
        if not self.apply or done is None:
            outcome = "dry run" if self.mutates and not self.apply else ""
            if self.mutates and not self.apply:
                self.needs_attention = True  # found work a dry run did not do
        elif done:
            outcome = "done"
        else:
            outcome = f"skipped: {why_not}" if why_not else "skipped"
            self.needs_attention = True
        line = f"{subject}  {action}"
        if detail:
            line += f"  {detail}"
        if outcome:
            line += f"  [{outcome}]"
        self.stdout.write(line)

    def summary(self, found: int, noun: str, *, done: int, verb: str = "changed", missing_noun: str = "job") -> None:
        """The last line. "Nothing to do" only when nothing needs doing: a named object that does not exist
        (`report_missing`) does."""
        if found == 0 and self.missing:
            self.last_line(f"No {noun} found; {self.missing} named {missing_noun}(s) do not exist (see above).")
        elif found == 0:
            self.last_line(f"No {noun} found: nothing to do.")
        elif not self.apply:
            self.last_line(f"{found} {noun} found. Dry run: nothing changed; re-run with --apply to act.")
        else:
            self.last_line(f"{done} of {found} {noun} {verb}; {found - done} skipped.")

    def last_line(self, text: str) -> None:
        """Write the command's last line; from then on an interrupt changes nothing (its exit code stays the
        command's). A signal arriving while the line is written waits for it, then is ignored."""
        with runbook_signals.deferred():
            self.stdout.write(text)
            self.stdout.flush()
            runbook_signals.settle()
