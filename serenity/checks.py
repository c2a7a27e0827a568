"""System checks run at every start-up (`manage.py check`, runserver, migrate, the worker's boot).

The timeout nesting protects the lease: the queue must not redeliver a message while its worker may
still run (visibility > lease), the lease must outlive the task (lease > task limit), and the task
limit must cover the DRS call plus the Semrush writes it does after.
"""
from django.conf import settings
from django.core.checks import Error, Tags, register


def timeout_nesting_errors(
    *, visibility: int, lease: int, task_limit: int, drs: int, writes: int
) -> list[Error]:
    chain = [
        ("QUEUE_VISIBILITY_TIMEOUT_SECONDS", visibility, "JOB_LEASE_TTL_SECONDS", lease),
        ("JOB_LEASE_TTL_SECONDS", lease, "JOB_TASK_TIME_LIMIT_SECONDS", task_limit),
        ("JOB_TASK_TIME_LIMIT_SECONDS", task_limit, "DRS_TIMEOUT_SECONDS + SEMRUSH_WRITE_BUDGET_SECONDS",
         drs + writes),
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


@register(Tags.security, deploy=True)
def check_production_values(app_configs, **kwargs):
    errors = []
    if settings.SANDBOX_ENABLED:
        errors.append(Error(
            "The local simulators are mounted (SERENITY_ENVIRONMENT=local or test): this configuration must "
            "never be deployed.", hint="Set SERENITY_ENVIRONMENT to the deployment's name (e.g. production).",
            id="serenity.E002"))
    if not settings.IS_LOCAL and settings.DRS_TRANSPORT != "lambda":
        errors.append(Error("DRS_TRANSPORT must be `lambda` outside local runs.", id="serenity.E003"))
    return errors
