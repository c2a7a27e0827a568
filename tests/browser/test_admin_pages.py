"""The pages an operator opens, in headless Chromium: the jobs overview draws the bars of a known set of jobs and
raises the no-worker alarm, a real generation's page draws its waterfall (every delivery, a killed worker's
included) with nothing clipped at the widths an operator's window has, the admin and the API docs work under their
Content-Security-Policy, and no page shows a token or logs an error to the console."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from jobs.models import AsyncJob
from tests.jobs.conftest import KNOWN_TOKEN, plant, store_grant, waiting
from tests.markets.generation.test_handler import start_job
from tests.waits import wait_terminal, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def this_hour():
    return timezone.now().replace(minute=0, second=0, microsecond=0)


def hour_label(hours_ago: int) -> str:
    return f"{this_hour() - timedelta(hours=hours_ago):%Y-%m-%d %H:%M}"


def ended(status, *, hours_ago: int, **fields):
    at = this_hour() - timedelta(hours=hours_ago) + timedelta(minutes=5)
    return plant(status=status, ended_at=at, updated_at=at, created_at=at - timedelta(minutes=1), **fields)


def drawn_bars(driver, chart: str) -> dict:
    """`{(hour, outcome): count}` of the bars the browser laid out with a height, in one chart."""
    bars = driver.find_elements(By.CSS_SELECTOR, f'svg.outcomes[data-range="{chart}"] rect.bar')
    assert all(bar.size["height"] > 0 and bar.size["width"] > 0 for bar in bars)
    return {
        (bar.get_attribute("data-hour"), bar.get_attribute("data-outcome")): int(bar.get_attribute("data-count"))
        for bar in bars
    }


def test_the_overview_draws_the_bars_of_a_known_set_of_jobs(operator, queues, workers_alive):
    for _ in range(3):
        ended("COMPLETED", hours_ago=0)
    ended("FAILED", hours_ago=1, error_code="DRS_GENERATION_TERMINAL")
    ended("FAILED", hours_ago=5, error_code="NEEDS_REAUTH")
    ended("COMPLETED", hours_ago=30)
    store_grant(waiting(quiet=timedelta(seconds=20), params={"token": KNOWN_TOKEN}), KNOWN_TOKEN)

    driver = operator.open("/admin/jobs/asyncjob/overview/")

    day = {(hour_label(0), "completed"): 3, (hour_label(1), "failed"): 1, (hour_label(5), "needs_reauth"): 1}
    assert drawn_bars(driver, "24h") == day
    assert drawn_bars(driver, "7d") == {**day, (hour_label(30), "completed"): 1}
    figures = {
        cell.get_attribute("data-figure"): cell.text for cell in driver.find_elements(By.CSS_SELECTOR, "td.figure")
    }
    assert figures == {
        "running": "0",
        "waiting": "1",
        "stuck": "0",
        "awaiting reauth": "1",
        "market-jobs queue": "0",
        "DLQ": "0",
    }
    assert KNOWN_TOKEN not in driver.page_source
    assert operator.problems() == []

    # A bar is a link to the jobs it counts.
    driver.find_element(By.CSS_SELECTOR, f'rect.bar[data-hour="{hour_label(0)}"][data-outcome="completed"]').click()
    WebDriverWait(driver, 20).until(expected_conditions.url_contains("outcome=completed"))
    assert len(driver.find_elements(By.CSS_SELECTOR, "#result_list tbody tr")) == 3
    assert operator.problems() == []


def wait_delivery_span(span_file, job) -> None:
    """Until the span of the delivery that ended `job` is in the span file: it ends just after the job's row says
    COMPLETED (a killed delivery's never comes)."""

    def exported() -> bool:
        for line in span_file.read_text().splitlines() if span_file.exists() else []:
            try:
                attributes = json.loads(line)["attributes"]
            except ValueError:
                continue  # a line still being written
            if attributes.get("job.id") == str(job.id) and "job.outcome" in attributes:
                return True
        return False

    wait_until(exported, timeout=10, what="the delivery's span in the span file")


@pytest.mark.worker
def test_a_generations_page_draws_its_waterfall_from_its_spans(
    operator, span_file, issued_tokens, world, async_on, celery_worker
):
    job, _market = start_job(world)
    job = wait_terminal(job, timeout=45)
    assert job.status == "COMPLETED", job.error
    wait_delivery_span(span_file, job)

    driver = operator.open(f"/admin/jobs/asyncjob/{job.id}/change/")

    segments = driver.find_elements(By.CSS_SELECTOR, "svg.waterfall g.segment")
    labels = [s.get_attribute("data-label") for s in segments]
    steps = [label for label in labels if not label.startswith(("IMS POST", "Semrush ", "DRS POST"))]
    assert steps == [
        "request POST …/serenity/markets",
        "queued",
        "delivery 1",
        "DRS: generate prompts",
        "IMS: exchange token",
        "Semrush: write prompts",
        "publish",
    ]
    # Each outside call, in the step it belongs to: the request's own IMS mint and Semrush calls, DRS, the
    # exchange, the Semrush reads and writes, the publish.
    calls = [label.split(" ")[0] for label in labels if label.startswith(("IMS POST", "Semrush ", "DRS POST"))]
    assert {"IMS", "Semrush", "DRS"} <= set(calls)
    assert any(label.startswith("Semrush POST") and label.endswith("/publish") for label in labels)
    bars = driver.find_elements(By.CSS_SELECTOR, "svg.waterfall g.segment rect")
    assert len(bars) == len(labels) and all(bar.size["width"] > 0 for bar in bars)
    delivery = segments[labels.index("delivery 1")]
    assert delivery.get_attribute("data-note").startswith("completed")
    assert "From its traces" in driver.find_element(By.CSS_SELECTOR, ".waterfall-source").text
    page = driver.page_source
    for secret in (world.token, *issued_tokens):
        assert secret not in page
    assert operator.problems() == []
    assert AsyncJob.objects.get(id=job.id).events.exclude(trace_id="").exists()


def test_the_admin_pages_work_under_their_content_security_policy(operator, queues):
    plant(status="COMPLETED", ended_at=timezone.now())
    for path in ("/admin/", "/admin/jobs/asyncjob/", "/admin/jobs/asyncjob/?state=waiting"):
        driver = operator.open(path)
        assert driver.find_elements(By.ID, "user-tools")
        assert operator.problems() == [], path
    # The list's scripts ran (they are the admin's own files): the action bar counts selected rows.
    driver = operator.open("/admin/jobs/asyncjob/")
    driver.find_element(By.ID, "action-toggle").click()
    assert "1 of 1 selected" in driver.find_element(By.CSS_SELECTOR, ".action-counter").text
    assert operator.problems() == []


def test_the_api_docs_render_under_their_content_security_policy(browser):
    driver = browser.open("/api/docs")

    try:
        title = WebDriverWait(driver, 30).until(
            expected_conditions.visibility_of_element_located((By.CSS_SELECTOR, ".swagger-ui .info .title"))
        )
    except TimeoutException:
        pytest.fail(f"Swagger UI did not render: {browser.problems()}")
    assert title.text.startswith("Serenity market provisioning API")
    assert driver.find_elements(By.CSS_SELECTOR, ".swagger-ui .opblock")  # the operations are listed
    assert browser.problems() == []


# --- is anything consuming, and every delivery drawn, at any width ---------------------------------------------

WIDTHS = (800, 1024, 1400, 1920)


def test_with_no_worker_heartbeat_in_the_last_minute_and_one_job_waiting_the_overview_shows_the_no_worker_alarm(
    operator, queues
):
    from jobs.models import WorkerHeartbeat

    WorkerHeartbeat.objects.create(
        worker="killed-host:41", queues=",serenity-market-jobs,", beat_at=timezone.now() - timedelta(seconds=75)
    )
    waiting(quiet=timedelta(seconds=30))

    driver = operator.open("/admin/jobs/asyncjob/overview/")

    alarm = driver.find_element(By.CSS_SELECTOR, ".no-worker-alarm")
    assert alarm.is_displayed()
    assert alarm.text.startswith("No worker is alive: 1 job(s) in progress and 0 message(s) on the market-jobs queue")
    assert alarm.value_of_css_property("background-color") == "rgba(176, 0, 32, 1)"  # the stylesheet was applied
    tile = driver.find_element(By.CSS_SELECTOR, '.tile[data-tile="workers"]')
    assert tile.get_attribute("data-state") == "alarm" and tile.text.split("\n")[:2] == ["WORKERS ALIVE", "0"]
    dead = driver.find_element(By.CSS_SELECTOR, "tr.worker")
    assert dead.get_attribute("data-state") == "dead" and "DEAD: silent for 1m 15s" in dead.text
    assert operator.problems() == []


def unclipped(driver, svg_selector: str) -> list[str]:
    """What the browser laid out outside where it may be: an SVG text or bar beyond its chart or its own track,
    a label running into the plot, a chart wider than the window, or the page scrolling sideways."""
    return driver.execute_script(
        """
        const out = [];
        const inside = (r, box) => r.left >= box.left - 0.5 && r.right <= box.right + 0.5;
        const view = document.documentElement.clientWidth;
        if (document.documentElement.scrollWidth > view) out.push('page scrolls sideways: ' + document.documentElement.scrollWidth);
        for (const svg of document.querySelectorAll(arguments[0])) {
          const box = svg.getBoundingClientRect();
          if (box.right > view + 0.5) out.push('chart ends at ' + box.right + ' past ' + view);
          for (const el of svg.querySelectorAll('text, rect')) {
            const r = el.getBoundingClientRect();
            if (r.width === 0 && r.height === 0) continue;
            if (!inside(r, box)) out.push('outside the chart: ' + el.textContent + ' ' + r.left + '-' + r.right);
            const track = el.parentElement.closest('svg.track, svg.axis, svg.plot');
            if (track && track !== svg && !inside(r, track.getBoundingClientRect()))
              out.push('outside its track: ' + el.textContent);
          }
          for (const row of svg.querySelectorAll('g.segment')) {
            const shown = [...row.querySelectorAll('text.label')].filter(t => getComputedStyle(t).display !== 'none');
            const track = row.querySelector('svg.track');
            if (shown.length !== 1 || !track) {
              out.push(shown.length + ' labels shown, or no track, for ' + row.dataset.label);
              continue;
            }
            if (shown[0].getBoundingClientRect().right > track.getBoundingClientRect().left)
              out.push('label runs into the plot: ' + row.dataset.label);
          }
        }
        return out;
        """,
        svg_selector,
    )


def rows_of(driver) -> list[dict]:
    return [
        {
            "kind": g.get_attribute("data-kind"),
            "label": g.get_attribute("data-label"),
            "note": g.get_attribute("data-note"),
            "bar": g.find_element(By.CSS_SELECTOR, "rect").size["width"],
            "title": g.find_element(By.TAG_NAME, "title").get_attribute("textContent"),
        }
        for g in driver.find_elements(By.CSS_SELECTOR, "svg.waterfall g.segment")
    ]


@pytest.mark.worker
def test_a_job_whose_first_delivery_was_killed_and_whose_second_completed_draws_both_unclipped_at_every_width(
    operator, span_file, world, async_on, short_timeouts
):
    from celery.contrib.testing.worker import start_worker

    from serenity.celery import app
    from tests.markets.test_worker_crash import crash_worker

    job, _market = start_job(world)
    assert crash_worker("after_drs_persisted") == -9  # SIGKILL: its spans are never exported
    with start_worker(app, pool="threads", concurrency=2, perform_ping_check=False, loglevel="WARNING"):
        job = wait_terminal(job, timeout=45)
    assert job.status == "COMPLETED" and job.attempts == 2, job.error
    wait_delivery_span(span_file, job)

    for width in WIDTHS:
        operator.driver.set_window_size(width, 1000)
        driver = operator.open(f"/admin/jobs/asyncjob/{job.id}/change/")

        rows = rows_of(driver)
        deliveries = [r for r in rows if r["label"].startswith("delivery ")]
        assert [(d["label"], d["kind"]) for d in deliveries] == [("delivery 1", "died"), ("delivery 2", "delivery")]
        assert deliveries[0]["note"] == "worker died / lease expired"
        assert "no outcome recorded: its worker died" in deliveries[0]["title"]
        assert deliveries[1]["note"].startswith("completed")
        assert all(d["bar"] > 2 for d in deliveries)
        # The wait between them is drawn with its cause, and the first delivery's DRS step (from its history).
        kinds = [r["kind"] for r in rows]
        assert kinds.index("died") < kinds.index("queue", kinds.index("died")) < kinds.index("delivery")
        assert (
            "spans, and its history for the deliveries whose spans were never exported"
            in driver.find_element(By.CSS_SELECTOR, ".waterfall-source").text
        )
        assert unclipped(driver, "svg.waterfall") == [], width
        assert operator.problems() == [], width


def test_long_labels_notes_and_a_long_wait_are_fitted_without_clipping_at_every_width(operator, settings):
    from jobs.models import JobEvent

    settings.TRACES_FILE = ""
    job = plant(status="FAILED", error_code="SEMRUSH_PROJECT_REJECTED_AS_ITS_NAME_IS_FAR_TOO_LONG_TO_SHOW")
    start = timezone.now() - timedelta(hours=1)
    for offset, kind, detail in (
        (0, "created", ""),
        (0.2, "message_sent", ""),
        (0.4, "lease_claimed", ""),
        (0.5, "checkpoint", "generating"),
        (3.5, "checkpoint", "generated"),
        (3.6, "lease_released", "unexpected OperationalError while writing a very long explanation of what failed"),
        (98, "lease_claimed", ""),
        (98.01, "checkpoint", "writing"),
        (98.05, "checkpoint", "written"),
        (98.06, "failed", f"{job.error_code}: rejected"),
    ):
        JobEvent.objects.create(job=job, kind=kind, detail=detail, at=start + timedelta(seconds=offset))

    for width in WIDTHS:
        operator.driver.set_window_size(width, 1000)
        driver = operator.open(f"/admin/jobs/asyncjob/{job.id}/change/")

        rows = rows_of(driver)
        assert [r["label"] for r in rows if r["label"].startswith("delivery")] == ["delivery 1", "delivery 2"]
        # The 94-second wait is drawn shortened: the second delivery's 60 ms steps are still seen.
        assert driver.find_elements(By.CSS_SELECTOR, "svg.waterfall g.axis-break")
        assert all(r["bar"] >= 1 for r in rows)
        assert (
            next(r for r in rows if r["label"] == "delivery 1")["bar"]
            > 0.2 * driver.find_element(By.CSS_SELECTOR, "svg.waterfall svg.track").size["width"]
        )
        assert any("SEMRUSH_PROJECT_REJECTED_AS_ITS_NAME_IS_FAR_TOO_LONG_TO_SHOW" in r["title"] for r in rows)
        assert unclipped(driver, "svg.waterfall") == [], width
        assert operator.problems() == [], width


def test_the_overviews_charts_take_the_width_of_the_window(operator, queues, workers_alive):
    for hours_ago in (0, 3, 30, 100):
        ended("COMPLETED", hours_ago=hours_ago)

    for width in WIDTHS:
        operator.driver.set_window_size(width, 1000)
        driver = operator.open("/admin/jobs/asyncjob/overview/")

        assert unclipped(driver, "svg.outcomes") == [], width
        assert len(drawn_bars(driver, "7d")) == 4
        assert operator.problems() == [], width
