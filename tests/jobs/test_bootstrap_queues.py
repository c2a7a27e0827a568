"""The queue bootstrap command against the session's local SQS (moto server mode)."""

import json
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from jobs import readiness
from jobs.clients import sqs, ssm


def bootstrap(*args) -> list[str]:
    out = StringIO()
    call_command("bootstrap_queues", *args, stdout=out)
    return out.getvalue().splitlines()


@pytest.fixture
def restore_queues():
    """Put the session's queues back as the bootstrap leaves them, whatever the test changed."""
    yield
    sqs.ensure_queues()
    readiness.readiness_set("true")


def test_local_bootstrap_run_twice_reports_the_same_and_keeps_one_queue_each():
    expected = [
        f"dlq ready: {settings.MARKET_JOBS_DLQ}",
        f"queue ready: {settings.MARKET_JOBS_QUEUE} (visibility 960s)",
        f"queue ready: {settings.MAINTENANCE_QUEUE} (visibility 960s)",
        f"readiness parameter set: {settings.READINESS_PARAMETER} = true",
        "queues bootstrapped",
    ]

    assert bootstrap("--local") == expected
    assert bootstrap("--local") == expected
    urls = sqs.client().list_queues(QueueNamePrefix="serenity-").get("QueueUrls", [])
    assert sorted(urls) == sorted(
        [settings.MARKET_JOBS_QUEUE_URL, settings.MARKET_JOBS_DLQ_URL, settings.MAINTENANCE_QUEUE_URL]
    )


def test_local_bootstrap_gives_the_queue_its_visibility_timeout_and_a_redrive_to_the_dlq():
    bootstrap("--local")

    attributes = sqs.queue_attributes(settings.MARKET_JOBS_QUEUE_URL)
    dlq_arn = sqs.queue_attributes(settings.MARKET_JOBS_DLQ_URL)["QueueArn"]
    assert attributes["VisibilityTimeout"] == "960"
    assert json.loads(attributes["RedrivePolicy"]) == {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 8}


def test_local_bootstrap_marks_the_consumer_ready(restore_queues):
    ssm.put_parameter(settings.READINESS_PARAMETER, "false")

    bootstrap("--local")

    assert ssm.get_parameter(settings.READINESS_PARAMETER) == "true"


def test_local_bootstrap_repairs_a_queue_whose_visibility_timeout_drifted(restore_queues):
    sqs.client().set_queue_attributes(QueueUrl=settings.MARKET_JOBS_QUEUE_URL, Attributes={"VisibilityTimeout": "30"})

    bootstrap("--local")

    assert sqs.queue_attributes(settings.MARKET_JOBS_QUEUE_URL)["VisibilityTimeout"] == "960"


def test_verify_passes_on_bootstrapped_queues_and_changes_nothing():
    before = sqs.queue_attributes(settings.MARKET_JOBS_QUEUE_URL)

    lines = bootstrap("--verify")

    assert lines == [
        f"queues verified: {settings.MARKET_JOBS_QUEUE} (visibility 960s) redrives to {settings.MARKET_JOBS_DLQ}"
    ]
    assert sqs.queue_attributes(settings.MARKET_JOBS_QUEUE_URL) == before


def test_verify_reports_a_wrong_visibility_timeout_and_leaves_it_alone(restore_queues):
    sqs.client().set_queue_attributes(QueueUrl=settings.MARKET_JOBS_QUEUE_URL, Attributes={"VisibilityTimeout": "30"})

    with pytest.raises(CommandError) as failure:
        bootstrap("--verify")

    assert str(failure.value) == (
        f"1 problem(s) with {settings.MARKET_JOBS_QUEUE} / {settings.MARKET_JOBS_DLQ}:\n"
        f"  - {settings.MARKET_JOBS_QUEUE}: VisibilityTimeout is 30, expected 960"
    )
    assert sqs.queue_attributes(settings.MARKET_JOBS_QUEUE_URL)["VisibilityTimeout"] == "30"


def test_verify_reports_a_receive_limit_not_above_the_attempt_budget(restore_queues):
    client = sqs.client()
    policy = json.loads(sqs.queue_attributes(settings.MARKET_JOBS_QUEUE_URL)["RedrivePolicy"])
    client.set_queue_attributes(
        QueueUrl=settings.MARKET_JOBS_QUEUE_URL,
        Attributes={"RedrivePolicy": json.dumps({**policy, "maxReceiveCount": "5"})},
    )

    with pytest.raises(CommandError) as failure:
        bootstrap("--verify")

    assert str(failure.value).endswith(
        f"  - {settings.MARKET_JOBS_QUEUE}: RedrivePolicy maxReceiveCount is 5, it must be above JOB_MAX_ATTEMPTS=5"
    )


def test_verify_reports_a_missing_queue_without_creating_it(settings):
    settings.MARKET_JOBS_QUEUE = "serenity-market-jobs-missing"
    settings.MARKET_JOBS_QUEUE_URL = settings.MARKET_JOBS_QUEUE_URL.replace(
        "serenity-market-jobs", "serenity-market-jobs-missing"
    )

    with pytest.raises(CommandError) as failure:
        bootstrap("--verify")

    assert str(failure.value) == (
        f"1 problem(s) with serenity-market-jobs-missing / {settings.MARKET_JOBS_DLQ}:\n"
        "  - queue unreachable: QueueDoesNotExist"
    )
    assert sqs.client().list_queues(QueueNamePrefix="serenity-market-jobs-missing").get("QueueUrls", []) == []


def test_verify_is_the_default_outside_local_environments(settings, restore_queues):
    settings.IS_LOCAL = False
    sqs.client().set_queue_attributes(QueueUrl=settings.MARKET_JOBS_QUEUE_URL, Attributes={"VisibilityTimeout": "30"})

    with pytest.raises(CommandError, match="VisibilityTimeout is 30, expected 960"):
        bootstrap()

    assert sqs.queue_attributes(settings.MARKET_JOBS_QUEUE_URL)["VisibilityTimeout"] == "30"


def test_local_mode_is_refused_against_real_aws(settings):
    settings.IS_LOCAL = False
    settings.AWS_ENDPOINT_URL = ""

    with pytest.raises(CommandError) as failure:
        bootstrap("--local")

    assert str(failure.value) == (
        "--local creates queues and marks the consumer ready: it needs a local SQS endpoint "
        "(SERENITY_ENVIRONMENT=local or AWS_ENDPOINT_URL). Use --verify against AWS."
    )
