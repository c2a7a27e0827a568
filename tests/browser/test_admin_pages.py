"""The pages an operator opens, in headless Chromium: the jobs overview draws the bars of a known set of jobs,
a real generation's page draws its waterfall, the admin and the API docs work under their
Content-Security-Policy, and no page shows a token or logs an error to the console."""

import time
from datetime import timedelta

import pytest
from django.utils import timezone
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from jobs.models import AsyncJob
from tests.jobs.conftest import KNOWN_TOKEN, plant, store_grant, waiting
from tests.markets.test_worker import start_job, wait_terminal

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


@pytest.mark.worker
def test_a_generations_page_draws_its_waterfall_from_its_spans(
    operator, span_file, issued_tokens, world, async_on, celery_worker
):
    job, _market = start_job(world)
    job = wait_terminal(job, timeout=45)
    assert job.status == "COMPLETED", job.error
    time.sleep(0.5)  # the delivery's span ends just after the job's row says COMPLETED

    driver = operator.open(f"/admin/jobs/asyncjob/{job.id}/change/")

    segments = driver.find_elements(By.CSS_SELECTOR, "svg.waterfall g.segment")
    labels = [s.get_attribute("data-label") for s in segments]
    steps = [label for label in labels if not label.startswith(("IMS POST", "Semrush ", "DRS POST"))]
    assert steps == [
        "request POST …/serenity/markets",
        "queue wait",
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
