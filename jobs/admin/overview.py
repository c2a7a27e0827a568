"""What the admin's jobs overview says at a glance (jobs/admin/__init__.py draws it): the first line of tiles that
answers "is anything consuming?", with its alarm, and how each worker's heartbeat row reads. Figures come from
jobs/selectors.py and the queues' counts; everything here is wording and thresholds, no query."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

from django.conf import settings
from django.urls import reverse

from jobs import dlq, selectors
from jobs.display import ago, duration
from jobs.leases import CRASH_LOOP_LOST_DELIVERIES
from jobs.models import WorkerHeartbeat

OK, WARN, ALARM = "ok", "warn", "alarm"


@dataclass(frozen=True)
class Tile:
    """One figure of the first line: `state` colours it, `href` opens what it counts."""

    key: str
    label: str
    value: str
    state: str
    href: str
    detail: str = ""


@dataclass(frozen=True)
class FirstLine:
    tiles: list[Tile]
    alarm: str  # the no-worker alarm's sentence, or "" when it is off


def first_line(
    *,
    live: selectors.LiveWork,
    fleet: selectors.Fleet,
    oldest: tuple[UUID, datetime] | None,
    queues: dlq.QueueCounts | None,
    last_beat: WorkerHeartbeat | None,
    jobs_url: str,
    now: datetime,
) -> FirstLine:
    """The first line's tiles. The no-worker alarm is on when no worker is alive on the market-jobs queue while
    jobs are IN_PROGRESS or messages sit on that queue: nothing will consume them."""
    on_queue = dlq.total(queues["queue"]) if queues is not None else None
    alarm = ""
    if fleet.alive == 0 and (live.in_progress or on_queue):
        seen = f"last heartbeat {ago(last_beat.beat_at, now)} from {last_beat.worker}" if last_beat else "no heartbeat"
        messages = "" if on_queue is None else f" and {on_queue} message(s) on the market-jobs queue"
        alarm = (
            f"No worker is alive: {live.in_progress} job(s) in progress{messages}, and nothing consumes them "
            f"({seen}). Start or fix the workers (docs/operations.md, “Workers are down”)."
        )
    tiles = [
        _workers(fleet, alarm=bool(alarm), now=now),
        _oldest_waiting(oldest, alarm=bool(alarm), now=now),
        _drs_budget(live.in_flight, jobs_url, waiting=live.budget_waiting),
        Tile(
            "stuck",
            "stuck",
            str(live.states["stuck"]),
            WARN if live.states["stuck"] else OK,
            f"{jobs_url}?state=stuck",
            f"quiet for {duration(settings.JOB_STUCK_AFTER_SECONDS)}",
        ),
        # Jobs no worker runs until an operator names them (jobs/leases.py `crash_looping_or_parked_q`): one
        # figure from the job table, and the job list filtered to the same jobs; the parked ones counted apart.
        Tile(
            "crash-looping-or-parked",
            "crash-looping or parked",
            str(live.crash_looping_or_parked),
            WARN if live.crash_looping_or_parked else OK,
            f"{jobs_url}?attention=crash_loop",
            f"deliveries died {CRASH_LOOP_LOST_DELIVERIES}+ times in a row, or parked",
        ),
        Tile(
            "parked",
            "parked",
            str(live.parked),
            WARN if live.parked else OK,
            f"{jobs_url}?attention=parked",
            "not run again until named with --job or marked failed",
        ),
        _depth("dlq", "DLQ", None if queues is None else dlq.total(queues["dlq"]), f"{jobs_url}?attention=dlq"),
        _maintenance(queues, fleet),
    ]
    return FirstLine(tiles=tiles, alarm=alarm)


def _drs_budget(in_flight: int, jobs_url: str, *, waiting: int = 0) -> Tile:
    """The fleet's DRS budget (DRS_MAX_IN_FLIGHT): generations under a live lease of the budget. Full, new
    generations wait unreceived in the queue (jobs/worker/intake.py) and `oldest waiting` grows; it is back-pressure,
    not a fault, so it warns and never alarms. The jobs waiting for a place are counted apart: waiting, not stuck."""
    budget = settings.DRS_MAX_IN_FLIGHT
    if budget <= 0:
        return Tile("drs-budget", "DRS in flight", str(in_flight), OK, "", "no fleet budget (DRS_MAX_IN_FLIGHT=0)")
    free = max(0, budget - in_flight)
    if free == 0:
        detail = "the budget is full: new generations wait in the queue, unreceived"
    else:
        detail = f"of the fleet's budget (DRS_MAX_IN_FLIGHT), {free} free"
    if waiting:
        detail += f"; {waiting} job(s) waiting for a place (waiting, not stuck)"
    return Tile(
        "drs-budget",
        "DRS in flight",
        f"{in_flight} of {budget}",
        WARN if free == 0 else OK,
        f"{jobs_url}?state=running",
        detail,
    )


def _workers(fleet: selectors.Fleet, *, alarm: bool, now: datetime) -> Tile:
    ttl = int(selectors.worker_ttl().total_seconds())
    if alarm:
        state, detail = ALARM, "nothing consumes the market-jobs queue"
    elif fleet.alive == 0:
        state, detail = WARN, "none on the market-jobs queue: new work will wait"
    elif fleet.late:
        state, detail = WARN, f"{fleet.late} missed its last beat (dead once silent {ttl}s)"
    else:
        state, detail = OK, f"on the market-jobs queue, heartbeat within {ttl}s"
    return Tile("workers", "workers alive", str(fleet.alive), state, "#workers", detail)


def _oldest_waiting(oldest: tuple[UUID, datetime] | None, *, alarm: bool, now: datetime) -> Tile:
    if oldest is None:
        return Tile("oldest-waiting", "oldest waiting", "-", OK, "", "no job waits for a worker")
    job_id, since = oldest
    return Tile(
        "oldest-waiting",
        "oldest waiting",
        duration((now - since).total_seconds()),
        ALARM if alarm else OK,
        reverse("admin:jobs_asyncjob_change", args=[job_id]),
        f"since {since:%H:%M:%S} UTC, for a worker",
    )


def _depth(key: str, label: str, depth: int | None, href: str) -> Tile:
    if depth is None:
        return Tile(key, label, "?", WARN, href, "unreadable")
    return Tile(key, label, str(depth), WARN if depth else OK, href, "messages")


def _maintenance(queues: dlq.QueueCounts | None, fleet: selectors.Fleet) -> Tile:
    if queues is None:
        return Tile("maintenance", "maintenance queue", "?", WARN, "#workers", "unreadable")
    waiting = queues["maintenance"].get("Visible", 0)  # MaintenanceQueueDepth, as the probe emits it
    if waiting and not fleet.maintenance_alive:
        return Tile(
            "maintenance", "maintenance queue", str(waiting), WARN, "#workers", "waiting; no worker consumes it"
        )
    return Tile("maintenance", "maintenance queue", str(waiting), OK, "#workers", "waiting")


@dataclass(frozen=True)
class WorkerRow:
    worker: str
    queues: str
    beat_at: datetime
    state: str  # alive | late | dead
    text: str


def worker_row(row: WorkerHeartbeat, *, now: datetime, ttl: timedelta) -> WorkerRow:
    """How a heartbeat row reads: alive, late (it missed its last beat: alive still, by the rule, but a worker
    just killed looks exactly like this until it is dead) or dead."""
    silent = now - row.beat_at
    if silent >= ttl:
        state, text = "dead", f"DEAD: silent for {duration(silent.total_seconds())}"
    elif silent.total_seconds() > 1.5 * settings.WORKER_HEARTBEAT_SECONDS:
        state, text = "late", f"late: last beat {ago(row.beat_at, now)}, dead once silent {int(ttl.total_seconds())}s"
    else:
        state, text = "alive", f"alive, beat {ago(row.beat_at, now)}"
    return WorkerRow(row.worker, ", ".join(row.queue_names), row.beat_at, state, text)
