"""A job's waterfall (jobs/admin/timeline.py, jobs/admin/charts.py): every delivery is on it, one whose worker died included
(drawn from its claim to its lease's expiry, from the history, where it left no spans), every wait between
deliveries is drawn with its cause, and a long idle stretch is shortened on a broken axis instead of flattening
everything else."""

import json
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.admin import charts
from jobs.admin.timeline import DIED, job_timeline
from jobs.models import JobEvent
from tests.jobs.conftest import leased, plant

pytestmark = pytest.mark.django_db

T0 = timezone.now() - timedelta(hours=2)


def at(seconds: float):
    return T0 + timedelta(seconds=seconds)


def history(job, *steps):
    """`(offset seconds, kind, detail[, actor])` events of `job`, at known times."""
    for offset, kind, detail, *actor in steps:
        JobEvent.objects.create(job=job, kind=kind, detail=detail, actor=actor[0] if actor else "", at=at(offset))


def claim(offset: float, lease_seconds: float = 930, actor: str = "") -> tuple:
    until = at(offset + lease_seconds)
    return (offset, "lease_claimed", f"lease until {until:%Y-%m-%dT%H:%M:%S.%fZ}", actor)


def drawn(job, **kwargs) -> list[tuple[str, str, float, float, str]]:
    """`(label, kind, start, end, note)` of every segment, seconds rounded to the millisecond."""
    return [
        (s.label, s.kind, round(s.start, 3), round(s.end, 3), s.note)
        for s in job_timeline(job, **kwargs).segments
        if s.depth == 0
    ]


def test_a_delivery_whose_worker_died_is_drawn_from_its_claim_to_its_lease_expiry_then_the_wait_for_the_takeover():
    job = plant(status="COMPLETED", ended_at=at(1000))
    history(
        job,
        (0, "created", ""),
        (0.2, "message_sent", ""),
        claim(1.0, actor="host-a:1"),
        (1.1, "checkpoint", "generating", "host-a:1"),
        (4.0, "checkpoint", "generated", "host-a:1"),
        # SIGKILLed here: no outcome. Its lease runs out at 931 s; the message comes back at 961 s.
        claim(961.0, actor="host-b:2"),
        (962.0, "checkpoint", "published", "host-b:2"),
        (962.5, "completed", "", "host-b:2"),
    )

    segments = drawn(job)

    assert segments == [
        ("request (enqueue)", "request", 0.0, 0.2, ""),
        ("queued", "queue", 0.2, 1.0, ""),
        ("delivery 1", "died", 1.0, 931.0, DIED),
        ("queued", "queue", 931.0, 961.0, "its message came back after its dead worker's lease"),
        ("delivery 2", "delivery", 961.0, 962.5, "completed"),
    ]
    died = job_timeline(job).segments[2]
    assert "claimed" in died.tip and "last sign of life" in died.tip and "(checkpoint generated)" in died.tip
    assert [s.label for s in job_timeline(job).segments if s.depth == 1] == ["DRS: generate prompts", "publish"]


def test_a_stuck_job_shows_its_dead_delivery_up_to_the_lease_expiry_and_its_wait_up_to_now():
    now = timezone.now()
    job = leased(expires_in=-timedelta(minutes=10))
    job.lease_expires_at = now - timedelta(minutes=10)
    history(job, (0, "created", ""), (0.1, "message_sent", ""), claim(0.5))
    since_claim = (job.lease_expires_at - at(0)).total_seconds()

    segments = drawn(job, now=now)

    assert [s[:2] for s in segments] == [
        ("request (enqueue)", "request"),
        ("queued", "queue"),
        ("delivery 1", "died"),
        ("queued", "queue"),
    ]
    assert segments[2][3] == pytest.approx(since_claim, abs=0.01)  # its bar ends where its lease expired
    assert segments[3][2] == pytest.approx(since_claim, abs=0.01)
    assert segments[3][3] == pytest.approx((now - at(0)).total_seconds(), abs=0.01)


def test_a_delivery_still_running_is_drawn_up_to_now():
    now = timezone.now()
    job = leased(expires_in=timedelta(minutes=10), quiet=timedelta(seconds=5))
    history(job, (0, "created", ""), (0.1, "message_sent", ""), claim(1))

    (*_, running) = drawn(job, now=now)

    assert running[:2] == ("delivery 1", "delivery") and running[4] == "running"
    assert running[3] == pytest.approx((now - at(0)).total_seconds(), abs=0.01)


def test_waits_are_labelled_with_their_cause_backoff_fairness_and_re_authorisation():
    job = plant(status="COMPLETED", ended_at=at(500))
    history(
        job,
        (0, "created", ""),
        (0.1, "message_sent", ""),
        # Held back twice by the fairness rule (its organization ran its share): sent again delayed each time.
        (2.0, "message_sent", "delayed 10s"),
        (12.5, "message_sent", "delayed 10s"),
        claim(23.0),
        (24.0, "lease_released", "retry in 30s: SEMRUSH_UNAVAILABLE"),
        (24.0, "retry_scheduled", "SEMRUSH_UNAVAILABLE: 503"),
        (24.1, "message_sent", "delayed 30s"),
        claim(55.0),
        (56.0, "failed", "NEEDS_REAUTH: the user must sign in again"),
        (300.0, "reauthorized", "", "user-1"),
        (300.5, "message_sent", ""),
        claim(301.0),
        (303.0, "completed", ""),
    )

    segments = drawn(job)

    assert [(label, kind, note) for label, kind, _, _, note in segments] == [
        ("request (enqueue)", "request", ""),
        ("queued", "queue", ""),
        ("held back for fairness", "held", "held back 2 times"),
        ("queued", "queue", ""),
        ("delivery 1", "delivery", "retry: SEMRUSH_UNAVAILABLE"),
        ("retry backoff", "backoff", "sent delayed 30s"),
        ("queued", "queue", ""),
        ("delivery 2", "delivery", "NEEDS_REAUTH"),
        ("waiting for re-authorisation", "reauth", "ended FAILED NEEDS_REAUTH"),
        ("re-authorisation (enqueue)", "request", ""),
        ("queued", "queue", ""),
        ("delivery 3", "delivery", "completed"),
    ]
    held = segments[2]
    assert (held[2], held[3]) == (2.0, 22.5)  # from the first hold-back to the end of the last one's delay


def test_a_job_awaiting_re_authorisation_now_waits_up_to_now():
    now = timezone.now()
    job = plant(status="FAILED", error_code="NEEDS_REAUTH", ended_at=at(3))
    history(job, (0, "created", ""), (0.1, "message_sent", ""), claim(1), (3, "failed", "NEEDS_REAUTH: sign in"))

    (*_, wait) = drawn(job, now=now)

    assert wait[:3] == ("waiting for re-authorisation", "reauth", 3.0)
    assert wait[3] == pytest.approx((now - at(0)).total_seconds(), abs=0.01)


def test_a_crash_looped_job_shows_every_one_of_its_deliveries():
    job = plant(status="FAILED", error_code="RETRIES_EXHAUSTED", ended_at=at(7000))
    steps = [(0, "created", ""), (0.1, "message_sent", "")]
    for n in range(6):
        steps += [claim(1 + n * 961), (1.5 + n * 961, "checkpoint", "generating")]  # each killed in DRS
    steps += [claim(1 + 6 * 961), (1.01 + 6 * 961, "failed", "RETRIES_EXHAUSTED: attempts exhausted")]
    history(job, *steps)

    deliveries = [(label, kind) for label, kind, *_ in drawn(job) if label.startswith("delivery")]

    assert deliveries == [*((f"delivery {n}", "died") for n in range(1, 7)), ("delivery 7", "delivery")]


def test_a_parked_job_shows_its_dead_deliveries_then_the_parked_wait_until_an_operator_names_it():
    job = plant(status="COMPLETED", ended_at=at(5000))
    history(
        job,
        (0, "created", ""),
        (0.1, "message_sent", ""),
        claim(1, lease_seconds=10),
        claim(20, lease_seconds=10),
        (40, "parked", "parked, not run: its last 2 deliveries died without an outcome"),
        (3000, "message_sent", "re-enqueued by an operator"),
        claim(3001),
        (3010, "completed", ""),
    )

    segments = drawn(job)

    assert [(label, kind) for label, kind, *_ in segments if label.startswith("delivery")] == [
        ("delivery 1", "died"),
        ("delivery 2", "died"),
        ("delivery 3", "delivery"),
    ]
    (parked,) = [s for s in segments if s[1] == "parked"]
    assert parked[2:] == (40.0, 3000.0, "parked, not run: its last 2 deliveries died without an outcome")


def test_a_job_parked_now_waits_parked_up_to_now():
    job = plant(status="IN_PROGRESS", parked_at=at(40), lost_deliveries=2)
    history(job, (0, "created", ""), (0.1, "message_sent", ""), claim(1, lease_seconds=10), (40, "parked", "p"))

    (parked,) = [s for s in drawn(job, now=at(100)) if s[1] == "parked"]

    assert parked[2:4] == (40.0, 100.0)


def test_an_operator_releasing_a_dead_workers_lease_ends_its_delivery_at_the_lease_expiry():
    job = plant(status="COMPLETED", ended_at=at(2000))
    history(
        job,
        (0, "created", ""),
        (0.1, "message_sent", ""),
        claim(1),
        (1500, "lease_released", "stale lease released", "cli:ops"),
        (1500, "requeued", "", "cli:ops"),
        (1500.1, "message_sent", ""),
        claim(1501),
        (1502, "completed", ""),
    )

    segments = drawn(job)

    assert [s[:4] for s in segments[2:]] == [
        ("delivery 1", "died", 1.0, 931.0),
        ("queued", "queue", 931.0, 1501.0),
        ("delivery 2", "delivery", 1501.0, 1502.0),
    ]


def span(trace, span_id, parent, name, kind, start, end, **attributes):
    return {
        "traceId": trace,
        "spanId": span_id,
        "parentId": parent,
        "name": name,
        "kind": kind,
        "start": int(start * 1e9),
        "end": int(end * 1e9),
        "status": "UNSET",
        "attributes": attributes,
    }


def test_with_spans_a_killed_delivery_without_spans_is_drawn_from_the_history_and_no_wait_hides_it(settings, tmp_path):
    settings.TRACES_FILE = str(tmp_path / "spans.jsonl")
    trace = uuid.uuid4().hex
    job = plant(status="COMPLETED", ended_at=at(1000))
    JobEvent.objects.create(job=job, kind="created", at=at(0), trace_id=trace)
    history(job, (0.5, "message_sent", ""), claim(1.0), (1.2, "checkpoint", "generating"))
    JobEvent.objects.create(job=job, kind="lease_claimed", at=at(961.1), trace_id=trace, detail="")
    history(job, (963.0, "completed", ""))
    base = at(0).timestamp()
    docs = [
        span(trace, "r", None, "POST v2/orgs/<str:orgId>/serenity/markets", "SERVER", base, base + 0.6),
        span(trace, "p", "r", "apply_async/jobs.run", "PRODUCER", base + 0.4, base + 0.5),
        # The first delivery's worker was killed: none of its spans was exported. The redelivery's were.
        span(trace, "d2", "p", "run/jobs.run", "CONSUMER", base + 961.0, base + 963.0, **{"job.outcome": "completed"}),
        span(trace, "s", "d2", "semrush.publish", "INTERNAL", base + 962.0, base + 962.5),
    ]
    (tmp_path / "spans.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))

    timeline = job_timeline(job)

    assert timeline.source == "spans+history"
    assert [(s.label, s.kind) for s in timeline.segments] == [
        ("request POST …/serenity/markets", "request"),
        ("queued", "queue"),
        ("delivery 1", "died"),
        ("queued", "queue"),
        ("delivery 2", "delivery"),
        ("publish", "publish"),
    ]
    first_wait = timeline.segments[1]
    assert first_wait.end == pytest.approx(1.0, abs=0.001)  # up to the dead delivery's claim, not the redelivery


def test_a_long_wait_is_drawn_shortened_so_that_the_short_bars_stay_readable():
    job = plant(status="COMPLETED", ended_at=at(200))
    history(
        job,
        (0, "created", ""),
        (0.05, "message_sent", ""),
        claim(0.1),
        (0.2, "checkpoint", "generated"),
        (0.3, "lease_released", "retry in 98s: SEMRUSH_UNAVAILABLE"),
        (0.3, "retry_scheduled", "SEMRUSH_UNAVAILABLE: 503"),
        (0.31, "message_sent", "delayed 98s"),
        claim(98.4),
        (98.5, "checkpoint", "published"),
        (98.6, "completed", ""),
    )

    chart = charts.waterfall(job_timeline(job))

    (gap,) = chart["breaks"]
    assert gap["label"] == "+1m 38s"
    rows = {row.label: row for row in chart["rows"]}
    assert rows["retry backoff"].width <= 100 * charts.GAP_WIDTH + 1  # 98 s of the 98.6 drawn in a sliver
    assert rows["delivery 1"].width > 10 and rows["delivery 2"].width > 10  # 200 ms each: a tenth of the plot
    assert all(row.x + row.width <= 100 for row in chart["rows"])


def test_without_a_long_wait_the_axis_is_not_broken():
    job = plant(status="COMPLETED", ended_at=at(10))
    history(job, (0, "created", ""), (0.5, "message_sent", ""), claim(1), (5, "completed", ""))

    assert charts.waterfall(job_timeline(job))["breaks"] == []


def test_labels_and_notes_are_fitted_with_an_ellipsis_and_kept_whole_in_the_tooltip():
    job = plant(status="FAILED", error_code="X", ended_at=at(10))
    long = "SEMRUSH_PROJECT_REJECTED_AS_ITS_NAME_IS_FAR_TOO_LONG_TO_SHOW"
    history(job, (0, "created", ""), (0.5, "message_sent", ""), claim(1), (5, "failed", f"{long}: rejected"))

    chart = charts.waterfall(job_timeline(job))

    row = next(r for r in chart["rows"] if r.label == "delivery 1")
    assert row.text.endswith("…") and long not in row.text
    assert long in row.title
    assert charts.text_px(row.text) <= charts.MIN_WIDTH_PX * charts.PLOT_W / 100


def test_the_axis_never_writes_the_same_label_twice():
    # A linear stretch of 0.4 s around 2m 4s: every tick would read `2m 4s`.
    ticks = charts._ticks([charts.Piece(124.0, 124.4, 0.0, 1.0, False)], charts.MIN_WIDTH_PX * charts.PLOT_W / 100)

    labels = [tick["label"] for tick in ticks]
    assert labels == ["2m 4s"]


def test_every_bar_is_at_least_a_few_pixels_wide_at_the_narrowest_width():
    job = plant(status="COMPLETED", ended_at=at(80))
    history(
        job,
        (0, "created", ""),
        (0.01, "message_sent", ""),
        claim(0.02),
        (0.021, "checkpoint", "generating"),
        (70, "checkpoint", "generated"),
        (70.001, "checkpoint", "published"),
        (70.002, "completed", ""),
    )

    chart = charts.waterfall(job_timeline(job))

    plot_px = charts.MIN_WIDTH_PX * charts.PLOT_W / 100
    assert (
        min(row.width for row in chart["rows"]) * plot_px / 100 >= charts.MIN_BAR_PX - 0.05
    )  # widths are kept to 0.01 %
    assert all(row.x + row.width <= 100 for row in chart["rows"])
    # A bar that tiny still has its duration written beside it.
    tiny = min(chart["rows"], key=lambda row: row.width)
    assert tiny.text.startswith(tiny.duration)
