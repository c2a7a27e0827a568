"""The operator overview (outcomes per hour, live work, queues, workers, organizations waiting; every figure a
link to exactly the jobs it counts; a few queries) and a job's waterfall, from its spans or its history."""

import json
import re
import uuid
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from jobs.models import JobEvent
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
    assert 'class="worker" data-alive="yes"' in html


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
    svg = re.search(r'<svg class="waterfall".*?</svg>', html, re.S).group(0)
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
        ("queue wait", "2.00 s"),
        ("delivery 1", "13.10 s"),
        ("DRS: generate prompts", "10.00 s"),
        ("IMS exchange, Semrush project", "500 ms"),
        ("Semrush: write prompts", "2.00 s"),
        ("queue wait", "30.30 s"),
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
        ("queue wait", "1.00 s"),
        ("delivery 1", "5.00 s"),
        ("DRS: generate prompts", "3.00 s"),
        ("DRS POST /invoke", "2.90 s"),
        ("IMS: exchange token", "200 ms"),
        ("publish", "500 ms"),
    ]
    assert 'data-label="delivery 1" data-duration="5.00 s" data-note="completed, 1 SQL"' in html
