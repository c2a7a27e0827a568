"""System checks run at every start-up (`manage.py check`, runserver, migrate, the worker's boot).

The timeout nesting protects the lease: the queue must not redeliver a message while its worker may
still run (visibility > lease), the lease must outlive the task (lease > task limit), and the task
limit must cover the DRS call plus the Semrush writes it does after.

The receive limit protects the job row's own record of a crash loop: a message is moved to the DLQ after
MARKET_JOBS_MAX_RECEIVE_COUNT receives, and a job fails RETRIES_EXHAUSTED at the claim after JOB_MAX_ATTEMPTS
attempts, so the limit must be above the attempt budget for the job to end on its row first.
"""

from django.conf import settings
from django.core.checks import Error, Tags, register


def timeout_nesting_errors(*, visibility: int, lease: int, task_limit: int, drs: int, writes: int) -> list[Error]:
    chain = [
        ("QUEUE_VISIBILITY_TIMEOUT_SECONDS", visibility, "JOB_LEASE_TTL_SECONDS", lease),
        ("JOB_LEASE_TTL_SECONDS", lease, "JOB_TASK_TIME_LIMIT_SECONDS", task_limit),
        ("JOB_TASK_TIME_LIMIT_SECONDS", task_limit, "DRS_TIMEOUT_SECONDS + SEMRUSH_WRITE_BUDGET_SECONDS", drs + writes),
    ]
    return [
        Error(
            f"Timeouts must nest: {outer}={outer_v} must be greater than {inner}={inner_v}.",
            hint="Queue visibility > lease TTL > task time limit > DRS timeout + Semrush write budget.",
            id="serenity.E001",
        )
        for outer, outer_v, inner, inner_v in chain
        if not outer_v > inner_v
    ]


@register(Tags.compatibility)
def check_timeout_nesting(app_configs, **kwargs):
    return timeout_nesting_errors(
        visibility=settings.QUEUE_VISIBILITY_TIMEOUT_SECONDS,
        lease=settings.JOB_LEASE_TTL_SECONDS,
        task_limit=settings.JOB_TASK_TIME_LIMIT_SECONDS,
        drs=settings.DRS_TIMEOUT_SECONDS,
        writes=settings.SEMRUSH_WRITE_BUDGET_SECONDS,
    )


def receive_limit_errors(*, max_receive_count: int, max_attempts: int) -> list[Error]:
    if max_receive_count > max_attempts:
        return []
    return [
        Error(
            f"MARKET_JOBS_MAX_RECEIVE_COUNT={max_receive_count} must be greater than JOB_MAX_ATTEMPTS={max_attempts}.",
            hint="A message that keeps killing workers must end its job FAILED RETRIES_EXHAUSTED (at the claim after "
            "the last attempt) before SQS moves it to the DLQ.",
            id="serenity.E004",
        )
    ]


@register(Tags.compatibility)
def check_receive_limit(app_configs, **kwargs):
    return receive_limit_errors(
        max_receive_count=settings.MARKET_JOBS_MAX_RECEIVE_COUNT, max_attempts=settings.JOB_MAX_ATTEMPTS
    )


def session_key_errors(*, enabled: bool, key_b64: str) -> list[Error]:
    """Session tokens on: their public key must be a P-256 key in its configured form, or no session token could
    ever be verified (every UI call a 401)."""
    if not enabled:
        return []
    from serenity.auth import session_public_key

    try:
        session_public_key(key_b64)
    except (ValueError, TypeError) as exc:
        return [
            Error(
                f"SESSION_TOKEN_PUBLIC_KEY_B64 is not a usable session-token key: {type(exc).__name__}.",
                hint="Base64 of the PEM (SubjectPublicKeyInfo) of the P-256 key session tokens are signed "
                "with, as the original service's AUTH_PUBLIC_KEY_B64; or SESSION_TOKENS_ENABLED=false.",
                id="serenity.E005",
            )
        ]
    return []


@register(Tags.security)
def check_session_key(app_configs, **kwargs):
    return session_key_errors(enabled=settings.SESSION_TOKENS_ENABLED, key_b64=settings.SESSION_TOKEN_PUBLIC_KEY_B64)


@register(Tags.security, deploy=True)
def check_production_values(app_configs, **kwargs):
    errors = []
    if settings.SANDBOX_ENABLED:
        errors.append(
            Error(
                "The local simulators are mounted (SERENITY_ENVIRONMENT=local or test): this configuration must "
                "never be deployed.",
                hint="Set SERENITY_ENVIRONMENT to the deployment's name (e.g. production).",
                id="serenity.E002",
            )
        )
    if not settings.IS_LOCAL and settings.DRS_TRANSPORT != "lambda":
        errors.append(Error("DRS_TRANSPORT must be `lambda` outside local runs.", id="serenity.E003"))
    return errors
