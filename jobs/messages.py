"""The job message on the wire: the task it calls, its body `{jobId, type}` (ids only, never a token), and
how to read one back from a raw SQS body."""

import base64
import binascii
import json
import uuid

RUN_TASK = "jobs.run"


def message_kwargs(job_id: object, job_type: str) -> dict[str, str]:
    return {"jobId": str(job_id), "type": job_type}


def decode_job_message(body: str) -> tuple[str, str | None] | None:
    """`(jobId, type)` from a job message as Celery puts it on SQS, or None when the body is not one.

    kombu's SQS transport sends base64 of a JSON envelope whose `body` is base64 of the JSON task call
    `[args, kwargs, embed]`; a job message has kwargs `{jobId, type}`.
    """
    try:
        text = body if body.lstrip().startswith("{") else base64.b64decode(body, validate=True).decode()
        envelope = json.loads(text)
        if envelope.get("headers", {}).get("task") != RUN_TASK:
            return None
        inner = envelope["body"]
        if envelope.get("properties", {}).get("body_encoding", "base64") == "base64":
            inner = base64.b64decode(inner).decode()
        _args, kwargs, _embed = json.loads(inner)
        job_id = str(uuid.UUID(str(kwargs["jobId"])))
    except (ValueError, TypeError, KeyError, AttributeError, binascii.Error, UnicodeDecodeError):
        return None
    job_type = kwargs.get("type")
    return job_id, job_type if isinstance(job_type, str) else None


def task_name(body: str) -> str | None:
    """The Celery task a raw SQS message body calls (e.g. `jobs.run`, `jobs.sweep_unsent`), or None when the
    body is not a Celery message at all."""
    try:
        text = body if body.lstrip().startswith("{") else base64.b64decode(body, validate=True).decode()
        task = json.loads(text).get("headers", {}).get("task")
    except (ValueError, TypeError, AttributeError, binascii.Error, UnicodeDecodeError):
        return None
    return task if isinstance(task, str) else None
