"""The operator overview (outcomes per hour, live work, queues, workers, organizations waiting; every figure a
link to exactly the jobs it counts; a few queries) and a job's waterfall, from its spans or its history."""

import json
import re
import uuid
from datetime import timedelta

import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from jobs.leases import crash_looping
from jobs.models import JobEvent, WorkerHeartbeat
from tests.jobs.conftest import KNOWN_TOKEN, ago, leased, plant, store_grant, waiting

pytestmark = pytest.mark.django_db

OVERVIEW = reverse("admin:jobs_asyncjob_overview")
LIST = reverse("admin:jobs_asyncjob_changelist")
ORG_A, ORG_B = uuid.uuid4(), uuid.uuid4()


def this_hour():
    return timezone.now().replace(minute=0, second=0, microsecond=0)


def ended(status, *, hours_ago: int, minutes: int = 10, **fields):
    at = this_hour() - timedelta(hours=hours_ago) + timedelta(minutes=minutes)
    return plant(status=status, ended_at=at, updated_at=at, created_at=at - timedelta(minutes=1), **fields)


@pytest.fixture
def fleet(workers_alive):
    """Finished jobs in known hours, and live work in each state."""
    return {
        "done_now": [ended("COMPLETED", hours_ago=0, minutes=m) for m in (0, 1, 2)],
        "failed_now": [ended("FAILED", hours_ago=0, error_code="DRS_GENERATION_TERMINAL")],
        "reauth_2h": [ended("FAILED", hours_ago=2, error_code="NEEDS_REAUTH")],
        "done_3d": [ended("COMPLETED", hours_ago=72)],
        "done_8d": [ended("COMPLETED", hours_ago=24 * 8)],  # outside both charts
        "running": [leased(expires_in=timedelta(minutes=10), quiet=timedelta(seconds=5), organization_id=ORG_A)],
        "waiting": [waiting(quiet=timedelta(seconds=30), organization_id=ORG_A) for _ in range(2)]
        + [waiting(quiet=timedelta(seconds=30), organization_id=ORG_B)],
        "stuck": [waiting(quiet=timedelta(hours=3), organization_id=ORG_B)],
    }


def bars(html: str, chart: str) -> dict:
    """`{(hour, outcome): count}` read from one chart's SVG blocks."""
    svg = re.search(rf'<svg class="outcomes" data-range="{chart}".*?</svg>', html, re.S).group(0)
    return {
        (h, o): int(c) for h, o, c in re.findall(r'data-hour="([^"]+)" data-outcome="([^"]+)" data-count="(\d+)"', svg)
    }


def hour_label(hours_ago: int) -> str:
    return f"{this_hour() - timedelta(hours=hours_ago):%Y-%m-%d %H:%M}"


def test_the_overview_charts_each_hours_outcomes_and_counts_live_work_in_a_few_queries(
    admin_client, fleet, queues, django_assert_max_num_queries
):
    admin_client.get(OVERVIEW)  # the session and the user are loaded once per request either way
    with django_assert_max_num_queries(7):
        response = admin_client.get(OVERVIEW)

    assert response.status_code == 200
    html = response.content.decode()
    assert bars(html, "24h") == {
        (hour_label(0), "completed"): 3,
        (hour_label(0), "failed"): 1,
        (hour_label(2), "needs_reauth"): 1,
    }
    assert bars(html, "7d") == {**bars(html, "24h"), (hour_label(72), "completed"): 1}
    figures = dict(re.findall(r'data-figure="([^"]+)"><a href="[^"]+">(\d+)</a>', html))
    assert figures == {
        "running": "1",
        "waiting": "3",
        "stuck": "1",
        "awaiting reauth": "1",
        "market-jobs queue": "0",
        "DLQ": "0",
    }
    assert re.findall(r'data-organization="([^"]+)"><td>[^<]+</td><td><a href="[^"]+">(\d+)</a>', html) == [
        (str(ORG_A), "2"),
        (str(ORG_B), "1"),
    ]
    assert 'class="worker worker-alive" data-alive="yes"' in html
    assert tiles(html) == {
        "workers": ("1", "ok"),
        "oldest-waiting": ("3h", "ok"),  # the stuck one: it waits for a worker too
        "drs-budget": (f"1 of {settings.DRS_MAX_IN_FLIGHT}", "ok"),  # the running job's live lease
        "stuck": ("1", "warn"),
        "crash-looping-or-parked": ("0", "ok"),
        "parked": ("0", "ok"),
        "dlq": ("0", "ok"),
        "maintenance": ("0", "ok"),
    }
    assert "no-worker-alarm" not in html


def tiles(html: str) -> dict:
    """`{tile: (value, state)}` of the overview's first line."""
    return {
        key: (value, state)
        for key, state, value in re.findall(
            r'data-tile="([^"]+)" data-state="([^"]+)"[^>]*>\s*<span class="tile-label">[^<]*</span>\s*'
            r'<span class="tile-value">([^<]*)</span>',
            html,
        )
    }


def tile_href(html: str, key: str) -> str:
    return re.search(rf'data-tile="{key}" data-state="[^"]+" href="([^"]+)"', html).group(1)


def beat(worker: str, *, seconds_ago: float, queues=None):
    return WorkerHeartbeat.objects.create(
        worker=worker,
        queues=queues or f",{settings.MARKET_JOBS_QUEUE},{settings.MAINTENANCE_QUEUE},",
        beat_at=timezone.now() - timedelta(seconds=seconds_ago),
    )


def test_with_no_worker_heartbeat_in_the_last_minute_and_a_job_waiting_the_overview_raises_the_no_worker_alarm(
    admin_client, queues
):
    beat("gone-host:7", seconds_ago=90)
    waiting(quiet=timedelta(seconds=40))

    html = admin_client.get(OVERVIEW).content.decode()

    alarm = re.search(r'<p class="no-worker-alarm" role="alert" data-alarm="no-worker">([^<]+)</p>', html).group(1)
    assert alarm.startswith("No worker is alive: 1 job(s) in progress and 0 message(s) on the market-jobs queue")
    assert "last heartbeat 1m ago from gone-host:7" in alarm
    assert tiles(html)["workers"] == ("0", "alarm")
    assert tiles(html)["oldest-waiting"] == ("40s", "alarm")


def test_messages_on_the_queue_with_no_worker_alive_raise_the_alarm_too(admin_client, queues):
    from jobs.services import producer

    producer._send(uuid.uuid4(), "testEcho")  # a message for no job row: still nothing consumes it

    html = admin_client.get(OVERVIEW).content.decode()

    assert "No worker is alive: 0 job(s) in progress and 1 message(s) on the market-jobs queue" in html
    assert "no heartbeat" in html
    assert tiles(html)["workers"] == ("0", "alarm")


def test_no_worker_and_nothing_waiting_is_a_warning_not_the_alarm(admin_client, queues):
    html = admin_client.get(OVERVIEW).content.decode()

    assert "no-worker-alarm" not in html
    assert tiles(html)["workers"] == ("0", "warn")


def test_a_worker_that_missed_its_last_beat_still_counts_alive_but_reads_late(admin_client, queues, settings):
    beat("slow-host:1", seconds_ago=1.5 * settings.WORKER_HEARTBEAT_SECONDS + 5)
    beat("fine-host:2", seconds_ago=2)

    html = admin_client.get(OVERVIEW).content.decode()

    assert tiles(html)["workers"] == ("2", "warn")
    assert "1 missed its last beat" in html
    assert dict(re.findall(r'<tr class="worker worker-(\w+)"[^>]*><td><a[^>]*>([^<]+)</a>', html)) == {
        "late": "slow-host:1",
        "alive": "fine-host:2",
    }


def test_dead_and_alive_workers_look_different_and_rows_past_the_retention_window_are_not_listed(
    admin_client, queues, settings
):
    settings.WORKER_HEARTBEAT_RETENTION_SECONDS = 3600
    beat("alive-host:1", seconds_ago=3)
    beat("dead-host:2", seconds_ago=15 * 60)
    beat("long-gone:3", seconds_ago=3601)

    html = admin_client.get(OVERVIEW).content.decode()

    rows = re.findall(
        r'<tr class="worker worker-(\w+)"[^>]*><td><a[^>]*>([^<]+)</a></td>.*?<span class="worker-state">([^<]+)</span>',
        html,
    )
    assert rows == [("alive", "alive-host:1", "alive, beat 3s ago"), ("dead", "dead-host:2", "DEAD: silent for 15m")]
    assert "its row is kept for 1h, then the purge deletes it" in html


def test_the_first_line_counts_crash_looping_jobs_by_the_claims_rule_and_links_to_exactly_them(
    admin_client, queues, workers_alive
):
    two_lost = waiting(quiet=timedelta(minutes=1), lost_deliveries=2, attempts=2)
    one_lost_and_expired = leased(expires_in=-timedelta(minutes=1), lost_deliveries=1, attempts=2)
    one_lost = waiting(quiet=timedelta(minutes=1), lost_deliveries=1, attempts=1)
    expired_once = leased(expires_in=-timedelta(minutes=1), attempts=1)
    finished = plant(status="FAILED", error_code="RETRIES_EXHAUSTED", lost_deliveries=3, ended_at=timezone.now())
    planted = [two_lost, one_lost_and_expired, one_lost, expired_once, finished]

    html = admin_client.get(OVERVIEW).content.decode()

    looping = {job.id for job in planted if job.status == "IN_PROGRESS" and crash_looping(job)}
    assert looping == {two_lost.id, one_lost_and_expired.id}
    assert tiles(html)["crash-looping-or-parked"] == ("2", "warn")
    assert listed(admin_client, tile_href(html, "crash-looping-or-parked")) == looping


def test_the_first_line_counts_parked_jobs_and_links_to_exactly_them(admin_client, queues, workers_alive):
    parked = waiting(quiet=timedelta(minutes=1), lost_deliveries=2, attempts=2, parked_at=timezone.now())
    # Parked at its message's last receive before the DLQ: no delivery of it died.
    parked_at_its_last_receive = waiting(quiet=timedelta(minutes=1), attempts=1, parked_at=timezone.now())
    looping = waiting(quiet=timedelta(minutes=1), lost_deliveries=2, attempts=2)  # crash-looping, not yet parked

    html = admin_client.get(OVERVIEW).content.decode()

    assert tiles(html)["parked"] == ("2", "warn")
    assert tiles(html)["crash-looping-or-parked"] == ("3", "warn")
    assert listed(admin_client, tile_href(html, "parked")) == {parked.id, parked_at_its_last_receive.id}
    assert listed(admin_client, tile_href(html, "crash-looping-or-parked")) == {
        parked.id,
        parked_at_its_last_receive.id,
        looping.id,
    }


def test_the_oldest_waiting_job_waits_since_its_message_became_receivable_or_its_dead_workers_lease_expired(
    admin_client, queues, workers_alive
):
    now = timezone.now()
    plant(message_sent_at=now - timedelta(minutes=9), runnable_at=now + timedelta(minutes=1))  # in its retry delay
    plant(message_sent_at=now - timedelta(minutes=4), runnable_at=now - timedelta(minutes=4))
    died = leased(expires_in=-timedelta(minutes=6), quiet=timedelta(minutes=20))
    leased(expires_in=timedelta(minutes=5), quiet=timedelta(minutes=30))  # running: not waiting
    # parked: its message is deleted, no worker will take it
    plant(message_sent_at=now - timedelta(hours=2), runnable_at=now - timedelta(hours=2), parked_at=now)

    html = admin_client.get(OVERVIEW).content.decode()

    assert tiles(html)["oldest-waiting"] == ("6m", "ok")
    assert tile_href(html, "oldest-waiting") == reverse("admin:jobs_asyncjob_change", args=[died.id])


def test_the_dlq_and_the_maintenance_queues_depth_are_on_the_first_line(admin_client, queues, workers_alive):
    from jobs.tasks import sweep_unsent_task
    from tests.jobs.conftest import to_dlq

    to_dlq(waiting().id)
    for _ in range(3):
        sweep_unsent_task.apply_async()

    html = admin_client.get(OVERVIEW).content.decode()

    assert tiles(html)["dlq"] == ("1", "warn")
    assert tiles(html)["maintenance"] == ("3", "ok")  # a worker consumes it


def test_messages_on_the_maintenance_queue_no_worker_consumes_are_a_warning(admin_client, queues):
    from jobs.tasks import sweep_unsent_task

    beat("jobs-only:1", seconds_ago=1, queues=f",{settings.MARKET_JOBS_QUEUE},")
    sweep_unsent_task.apply_async()

    html = admin_client.get(OVERVIEW).content.decode()

    assert tiles(html)["maintenance"] == ("1", "warn")
    assert "waiting; no worker consumes it" in html


def listed(client, url: str) -> set:
    response = client.get(url.replace("&amp;", "&"))
    assert response.status_code == 200
    return {job.id for job in response.context["cl"].result_list}


def test_each_figure_links_to_exactly_the_jobs_it_counts(admin_client, fleet, queues):
    html = admin_client.get(OVERVIEW).content.decode()

    block = re.search(
        r'<a href="([^"]+)"><rect class="bar" data-hour="' + hour_label(0) + r'" data-outcome="completed"', html
    ).group(1)
    assert listed(admin_client, block) == {j.id for j in fleet["done_now"]}
    links = dict(re.findall(r'data-figure="([^"]+)"><a href="([^"]+)"', html))
    assert listed(admin_client, links["running"]) == {j.id for j in fleet["running"]}
    assert listed(admin_client, links["waiting"]) == {j.id for j in fleet["waiting"]}
    assert listed(admin_client, links["stuck"]) == {j.id for j in fleet["stuck"]}
    assert listed(admin_client, links["awaiting reauth"]) == {j.id for j in fleet["reauth_2h"]}
    totals = dict((o, url) for url, o in re.findall(r'<a href="([^"]+)" class="total" data-outcome="([^"]+)"', html))
    assert listed(admin_client, totals["completed"]) == {j.id for j in fleet["done_now"]}  # not the one 3 days ago
    assert listed(admin_client, totals["needs_reauth"]) == {j.id for j in fleet["reauth_2h"]}
    org_a = re.search(rf'data-organization="{ORG_A}"><td>[^<]+</td><td><a href="([^"]+)"', html).group(1)
    assert listed(admin_client, org_a) == {j.id for j in fleet["waiting"][:2]}


def history(job, *steps):
    """Events at known offsets (seconds) from the job's creation: `(offset, kind, detail)`."""
    start = ago(minutes=10)
    for offset, kind, detail in steps:
        JobEvent.objects.create(job=job, kind=kind, detail=detail, at=start + timedelta(seconds=offset))


def segments(html: str) -> list[tuple[str, str]]:
    svg = re.search(r'<svg class="waterfall".*?</svg>\s*<p class="waterfall-legend"', html, re.S).group(0)
    return [
        (label, duration)
        for label, duration in re.findall(
            r'class="segment" data-kind="[^"]+" data-label="([^"]+)" data-duration="([^"]+)"', svg
        )
    ]


def test_without_spans_the_waterfall_is_drawn_from_the_jobs_history(admin_client, settings):
    settings.TRACES_FILE = ""
    job = plant(status="COMPLETED", ended_at=timezone.now())
    store_grant(job, KNOWN_TOKEN)
    history(
        job,
        (0, "created", ""),
        (0.5, "message_sent", ""),
        (2.5, "lease_claimed", ""),
        (2.6, "checkpoint", "generating"),
        (12.6, "checkpoint", "generated"),
        (13.1, "checkpoint", "writing"),
        (15.1, "checkpoint", "written"),
        (15.6, "retry_scheduled", "SEMRUSH_PUBLISH_FAILED: publish failed"),
        (15.7, "message_sent", "delayed 30s"),
        (46, "lease_claimed", ""),
        (46.2, "checkpoint", "writing"),
        (47.2, "checkpoint", "published"),
        (47.3, "completed", ""),
    )

    html = admin_client.get(reverse("admin:jobs_asyncjob_change", args=[job.id])).content.decode()

    assert "From its history" in html
    assert segments(html) == [
        ("request (enqueue)", "500 ms"),
        ("queued", "2.00 s"),
        ("delivery 1", "13.10 s"),
        ("DRS: generate prompts", "10.00 s"),
        ("IMS exchange, Semrush project", "500 ms"),
        ("Semrush: write prompts", "2.00 s"),
        ("retry backoff", "30.00 s"),
        ("queued", "300 ms"),
        ("delivery 2", "1.30 s"),
        ("IMS exchange, Semrush project", "200 ms"),
        ("publish", "1.00 s"),
    ]
    assert KNOWN_TOKEN not in html


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
        "service": "serenity",
        "attributes": attributes,
    }


def test_with_spans_kept_the_waterfall_shows_the_request_queue_deliveries_and_external_calls(
    admin_client, settings, tmp_path
):
    trace = uuid.uuid4().hex
    settings.TRACES_FILE = str(tmp_path / "spans.jsonl")
    job = plant(status="COMPLETED", ended_at=timezone.now())
    JobEvent.objects.create(job=job, kind="created", trace_id=trace)
    base = 1_700_000_000
    docs = [
        span(
            trace,
            "a1",
            None,
            "POST v2/orgs/<str:orgId>/brands/<str:brandId>/serenity/markets",
            "SERVER",
            base,
            base + 0.8,
            **{"http.response.status_code": 201},
        ),
        span(
            trace,
            "a2",
            "a1",
            "POST",
            "CLIENT",
            base + 0.1,
            base + 0.3,
            **{"url.full": "http://ims.example/ims/token/v4", "http.request.method": "POST"},
        ),
        span(trace, "a3", "a1", "apply_async/jobs.run", "PRODUCER", base + 0.6, base + 0.7),
        span(
            trace,
            "a4",
            "a3",
            "run/jobs.run",
            "CONSUMER",
            base + 1.7,
            base + 6.7,
            **{"job.attempt": 1, "job.outcome": "completed"},
        ),
        span(trace, "a5", "a4", "drs.generate", "INTERNAL", base + 1.8, base + 4.8),
        span(trace, "a6", "a5", "POST", "CLIENT", base + 1.8, base + 4.7, **{"url.full": "http://drs.example/invoke"}),
        span(trace, "a7", "a4", "ims.exchange", "INTERNAL", base + 4.9, base + 5.1),
        span(trace, "a8", "a4", "semrush.publish", "INTERNAL", base + 6.0, base + 6.5),
        span(trace, "a9", "a4", "SELECT", "CLIENT", base + 6.6, base + 6.61, **{"db.system": "postgresql"}),
        span(uuid.uuid4().hex, "b1", None, "GET", "SERVER", base, base + 1),  # another trace
    ]
    (tmp_path / "spans.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))

    html = admin_client.get(reverse("admin:jobs_asyncjob_change", args=[job.id])).content.decode()

    assert "From its traces" in html and trace in html
    assert segments(html) == [
        ("request POST …/serenity/markets", "800 ms"),
        ("IMS POST /ims/token/v4", "200 ms"),
        ("queued", "1.00 s"),
        ("delivery 1", "5.00 s"),
        ("DRS: generate prompts", "3.00 s"),
        ("DRS POST /invoke", "2.90 s"),
        ("IMS: exchange token", "200 ms"),
        ("publish", "500 ms"),
    ]
    assert 'data-label="delivery 1" data-duration="5.00 s" data-note="completed, 1 SQL"' in html


def test_the_drs_budget_tile_counts_the_live_leases_and_warns_when_the_budget_is_full(admin_client, queues, settings):
    settings.DRS_MAX_IN_FLIGHT = 2
    leased(expires_in=timedelta(minutes=10), quiet=timedelta(seconds=5), organization_id=ORG_A)
    leased(expires_in=-timedelta(seconds=5), quiet=timedelta(seconds=5), organization_id=ORG_A)  # expired: free

    assert tiles(admin_client.get(OVERVIEW).content.decode())["drs-budget"] == ("1 of 2", "ok")
    leased(expires_in=timedelta(minutes=10), quiet=timedelta(seconds=5), organization_id=ORG_B)
    html = admin_client.get(OVERVIEW).content.decode()
    assert tiles(html)["drs-budget"] == ("2 of 2", "warn")
    assert "the budget is full: new generations wait in the queue, unreceived" in html
    settings.DRS_MAX_IN_FLIGHT = 0
    assert tiles(admin_client.get(OVERVIEW).content.decode())["drs-budget"] == ("2", "ok")


def test_a_job_waiting_for_a_full_drs_budget_past_the_stuck_threshold_is_waiting_not_stuck(
    admin_client, queues, settings
):
    settings.DRS_MAX_IN_FLIGHT = 2
    for org in (ORG_A, ORG_B):
        leased(expires_in=timedelta(minutes=10), quiet=timedelta(seconds=5), organization_id=org)
    waiting(quiet=timedelta(seconds=settings.JOB_STUCK_AFTER_SECONDS + 600), organization_id=ORG_A)

    html = admin_client.get(OVERVIEW).content.decode()

    assert tiles(html)["stuck"] == ("0", "ok")
    assert tiles(html)["drs-budget"] == ("2 of 2", "warn")
    assert "1 job(s) waiting for a place (waiting, not stuck)" in html
