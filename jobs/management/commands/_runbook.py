"""What every runbook command shares: dry run unless `--apply`, the narrowing filters, duration and id
parsing (bad input is a CommandError), and the one-line-per-object report with a summary."""
import getpass
import re
import uuid
from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from jobs.codes import ERROR_CODE
from jobs.models import JobStatus
from jobs.selectors import JobFilter

_DURATION = re.compile(r"^\s*(\d+)\s*([smhd])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_duration(value: str) -> timedelta:
    """`45s`, `30m`, `2h`, `1d` -> timedelta. Raises CommandError."""
    match = _DURATION.match(value or "")
    if not match:
        raise CommandError(f"--older-than must look like 45s, 30m, 2h or 1d (got {value!r}).")
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


def parse_job_id(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value.strip())
    except (ValueError, AttributeError):
        raise CommandError(f"--job must be a job id (a UUID), got {value!r}.") from None


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

    def add_arguments(self, parser):
        if self.mutates:
            parser.add_argument("--apply", action="store_true", help="act; without it this is a dry run that "
                                "changes nothing")
        if "job" in self.filters:
            parser.add_argument("--job", action="append", default=[], metavar="JOB_ID",
                                help="only this job (repeat for several)")
        if "older_than" in self.filters:
            default = f" (default {self.older_than_default})" if self.older_than_default else ""
            parser.add_argument("--older-than", default=self.older_than_default, metavar="AGE",
                                help=self.older_than_help + default)
        if "status" in self.filters:
            parser.add_argument("--status", choices=[s.value for s in JobStatus], help="only jobs in this status")
        if "code" in self.filters:
            parser.add_argument("--code", help="only jobs with this error code")

    def handle(self, *args, **options):
        self.apply = bool(options.get("apply"))
        self.now = timezone.now()
        self.actor = cli_actor()
        self.run(options)

    def run(self, options):
        raise NotImplementedError

    # -- parsing ------------------------------------------------------------------------------------------
    def job_filter(self, options) -> JobFilter:
        code = options.get("code")
        if code is not None and not ERROR_CODE.match(code):
            raise CommandError(f"--code must be an error code like NEEDS_REAUTH, got {code!r}.")
        return JobFilter(job_ids=tuple(parse_job_id(j) for j in options.get("job") or ()),
                         status=options.get("status"), code=code)

    def older_than(self, options) -> timedelta:
        value = options.get("older_than")
        return parse_duration(value) if value else timedelta(0)

    # -- output -------------------------------------------------------------------------------------------
    def item(self, subject, action: str, detail: str = "", done: bool | None = None, why_not: str = "") -> None:
        """One line per object: `<subject>  <action>  <detail>  [dry run | done | skipped: why]`."""
        if not self.apply or done is None:
            outcome = "dry run" if self.mutates and not self.apply else ""
        elif done:
            outcome = "done"
        else:
            outcome = f"skipped: {why_not}" if why_not else "skipped"
        line = f"{subject}  {action}"
        if detail:
            line += f"  {detail}"
        if outcome:
            line += f"  [{outcome}]"
        self.stdout.write(line)

    def summary(self, found: int, noun: str, *, done: int | None = None, verb: str = "changed") -> None:
        if found == 0:
            self.stdout.write(f"No {noun} found: nothing to do.")
        elif not self.apply:
            self.stdout.write(f"{found} {noun} found. Dry run: nothing changed; re-run with --apply to act.")
        else:
            self.stdout.write(f"{done} of {found} {noun} {verb}; {found - done} skipped.")
