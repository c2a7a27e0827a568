"""Celery tasks: thin interfaces to jobs.services. Messages carry ids, never objects or tokens."""
import logging
import socket
import threading

from celery import shared_task

from jobs import services

log = logging.getLogger(__name__)


@shared_task(name="jobs.run", ignore_result=True)
def run_job_task(jobId: str, type: str | None = None) -> str:  # noqa: N803,A002  (the wire names)
    """Run one delivery of a job message `{jobId, type}`."""
    worker = f"{socket.gethostname()}:{threading.get_ident()}"
    outcome = services.job_run(jobId, type, worker=worker)
    log.info("job delivery handled", extra={"job_id": jobId, "outcome": outcome})
    return outcome


@shared_task(name="jobs.sweep_unsent", ignore_result=True)
def sweep_unsent_task() -> int:
    return len(services.sweep_unsent())


@shared_task(name="jobs.probe", ignore_result=True)
def probe_task() -> None:
    from jobs import probe

    probe.run_probe()


@shared_task(name="jobs.purge_expired", ignore_result=True)
def purge_expired_task() -> int:
    """Daily: delete job records past their expiry, with their grants (same services as the runbook)."""
    from jobs import operations, selectors

    purged = sum(operations.job_purge(job.id) for job in selectors.jobs_expired())
    purged += sum(operations.grant_purge_orphan(grant.job_id) for grant in selectors.grants_orphaned())
    log.info("expired job records purged", extra={"purged": purged})
    return purged
