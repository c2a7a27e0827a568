"""Job services, one module per role; the public names are re-exported here so call sites read
`job_services.job_enqueue(...)` whichever module holds it.

- producer.py  enqueue a job with its credential, publish its message, re-authorise it
- runner.py    one delivery of a message -> one Outcome
- operator.py  every operator write (admin actions, runbook commands, the doctor)
- doctor.py    reconcile the job table with the queue and the DLQ
- endings.py   the one way a job ends (status and grant in one transaction), and its cancellation
"""

from jobs.services.endings import job_cancel, job_finish
from jobs.services.operator import (
    dlq_drop,
    dlq_redrive,
    grant_purge_orphan,
    job_mark_failed,
    job_purge,
    job_redrive,
    job_release_stale_lease,
    job_requeue,
    job_rerun,
    jobs_purge_expired,
    jobs_sweep_unsent,
    rerun_refusal,
)
from jobs.services.producer import Enqueued, job_enqueue, job_publish, job_reauthorize
from jobs.services.runner import job_run

__all__ = [
    "Enqueued",
    "dlq_drop",
    "dlq_redrive",
    "grant_purge_orphan",
    "job_cancel",
    "job_enqueue",
    "job_finish",
    "job_mark_failed",
    "job_publish",
    "job_purge",
    "job_reauthorize",
    "job_redrive",
    "job_release_stale_lease",
    "job_requeue",
    "job_rerun",
    "job_run",
    "jobs_purge_expired",
    "jobs_sweep_unsent",
    "rerun_refusal",
]
