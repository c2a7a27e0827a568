"""SQS through boto3: queue bootstrap and verification, DLQ reads for the redrive runbook, probes.

Celery sends and consumes the job messages itself (kombu's SQS transport); this module is for what
Celery does not do.
"""

import json
from functools import lru_cache
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from django.conf import settings

from serenity.clients.guard import guard_boto3_client

AWSError = (BotoCoreError, ClientError)


@lru_cache(maxsize=4)
def _client(endpoint: str, region: str, key: str, secret: str, connect: float, read: float, attempts: int) -> Any:
    # Bounded like the Celery transport's client (settings.SQS_*); reads here never long-poll (wait 0).
    kwargs = {
        "region_name": region,
        "config": Config(
            retries={"mode": "standard", "total_max_attempts": attempts}, connect_timeout=connect, read_timeout=read
        ),
    }
    if endpoint:
        kwargs["endpoint_url"] = endpoint
    if key:
        kwargs.update(aws_access_key_id=key, aws_secret_access_key=secret)
    return guard_boto3_client(boto3.client("sqs", **kwargs), "sqs")


def client() -> Any:
    """The SQS client. Typed Any: boto3 builds its clients at run time and ships no types for them."""
    return _client(
        settings.AWS_ENDPOINT_URL,
        settings.AWS_REGION,
        settings.AWS_ACCESS_KEY_ID,
        settings.AWS_SECRET_ACCESS_KEY,
        settings.SQS_CONNECT_TIMEOUT_SECONDS,
        settings.SQS_READ_TIMEOUT_SECONDS,
        settings.SQS_MAX_ATTEMPTS,
    )


def queue_reachable(url: str | None = None) -> bool:
    try:
        client().get_queue_attributes(QueueUrl=url or settings.MARKET_JOBS_QUEUE_URL, AttributeNames=["QueueArn"])
        return True
    except AWSError:
        return False


def queues_reachable() -> bool:
    """The market-jobs queue and the maintenance queue both answer (a worker consumes both)."""
    return all(queue_reachable(url) for url in (settings.MARKET_JOBS_QUEUE_URL, settings.MAINTENANCE_QUEUE_URL))


def queue_attributes(url: str) -> dict[str, str]:
    attributes: dict[str, str] = client().get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    return attributes


def desired_attributes(dlq_arn: str) -> dict[str, str]:
    return {
        "VisibilityTimeout": str(settings.QUEUE_VISIBILITY_TIMEOUT_SECONDS),
        "MessageRetentionPeriod": str(4 * 24 * 3600),
        "RedrivePolicy": json.dumps(
            {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(settings.MARKET_JOBS_MAX_RECEIVE_COUNT)}
        ),
    }


def ensure_queues() -> list[str]:
    """Create the DLQ and the market-jobs queue if missing and bring their attributes to the desired
    values. Idempotent. Returns what it did, a line each."""
    sqs = client()
    done = []
    dlq_url = sqs.create_queue(
        QueueName=settings.MARKET_JOBS_DLQ, Attributes={"MessageRetentionPeriod": str(14 * 24 * 3600)}
    )["QueueUrl"]
    done.append(f"dlq ready: {settings.MARKET_JOBS_DLQ}")
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    for name in (settings.MARKET_JOBS_QUEUE, settings.MAINTENANCE_QUEUE):
        url = sqs.create_queue(QueueName=name)["QueueUrl"]
        # set_queue_attributes, not create_queue(Attributes=...): changing attributes of an existing queue
        # through create_queue raises QueueAlreadyExists.
        sqs.set_queue_attributes(QueueUrl=url, Attributes=desired_attributes(dlq_arn))
        done.append(f"queue ready: {name} (visibility {settings.QUEUE_VISIBILITY_TIMEOUT_SECONDS}s)")
    return done


def verify_queues() -> list[str]:
    """Problems with the deployed queues, without changing anything (empty when all is well)."""
    problems = []
    try:
        dlq = queue_attributes(settings.MARKET_JOBS_DLQ_URL)
        queues = {
            name: queue_attributes(url)
            for name, url in (
                (settings.MARKET_JOBS_QUEUE, settings.MARKET_JOBS_QUEUE_URL),
                (settings.MAINTENANCE_QUEUE, settings.MAINTENANCE_QUEUE_URL),
            )
        }
    except AWSError as exc:
        return [f"queue unreachable: {type(exc).__name__}"]
    for name, attributes in queues.items():
        if int(attributes.get("VisibilityTimeout", 0)) != settings.QUEUE_VISIBILITY_TIMEOUT_SECONDS:
            problems.append(
                f"{name}: VisibilityTimeout is {attributes.get('VisibilityTimeout')}, expected "
                f"{settings.QUEUE_VISIBILITY_TIMEOUT_SECONDS}"
            )
        policy = json.loads(attributes.get("RedrivePolicy") or "{}")
        if policy.get("deadLetterTargetArn") != dlq.get("QueueArn"):
            problems.append(f"{name}: RedrivePolicy does not point at the DLQ")
        elif int(policy.get("maxReceiveCount") or 0) <= settings.JOB_MAX_ATTEMPTS:
            problems.append(
                f"{name}: RedrivePolicy maxReceiveCount is {policy.get('maxReceiveCount')}, it must be "
                f"above JOB_MAX_ATTEMPTS={settings.JOB_MAX_ATTEMPTS}"
            )
    return problems


def receive(url: str, *, max_messages: int = 10, wait: int = 0, visibility: int = 60) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = (
        client()
        .receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=max_messages,
            WaitTimeSeconds=wait,
            VisibilityTimeout=visibility,
            AttributeNames=["All"],
        )
        .get("Messages", [])
    )
    return messages


def delete(url: str, receipt_handle: str) -> None:
    client().delete_message(QueueUrl=url, ReceiptHandle=receipt_handle)


def change_visibility(url: str, receipt_handle: str, seconds: int) -> None:
    """Hide a received message for `seconds` more, or make it visible again at once with 0."""
    client().change_message_visibility(QueueUrl=url, ReceiptHandle=receipt_handle, VisibilityTimeout=seconds)


def change_visibility_batch(url: str, receipt_handles: list[str], seconds: int) -> list[str]:
    """`change_visibility` for up to 10 messages in one call. Returns the receipt handles SQS did not change
    (a message deleted meanwhile, or a handle that expired)."""
    entries = [
        {"Id": str(i), "ReceiptHandle": handle, "VisibilityTimeout": seconds}
        for i, handle in enumerate(receipt_handles)
    ]
    failed = client().change_message_visibility_batch(QueueUrl=url, Entries=entries).get("Failed", [])
    return [receipt_handles[int(entry["Id"])] for entry in failed]


def send_raw(url: str, body: str, *, delay: int = 0) -> str:
    message_id: str = client().send_message(QueueUrl=url, MessageBody=body, DelaySeconds=delay)["MessageId"]
    return message_id


def approximate_counts(url: str) -> dict[str, int]:
    attrs = client().get_queue_attributes(
        QueueUrl=url,
        AttributeNames=[
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ],
    )["Attributes"]
    return {k.replace("ApproximateNumberOfMessages", "") or "Visible": int(v) for k, v in attrs.items()}
