"""Jobs, their time budget, Celery on SQS, and beat's schedules (docs/operations.md says why each is set).

The timeouts nest (a system check refuses a configuration where they do not): queue visibility >
lease > task time limit > DRS timeout + Semrush write budget.
"""

from urllib.parse import urlsplit

from celery.schedules import crontab

from serenity.settings.django import DB_POOL_MAX_SIZE
from serenity.settings.environment import IS_LOCAL, env
from serenity.settings.services import (
    AWS_ACCESS_KEY_ID,
    AWS_ENDPOINT_URL,
    AWS_REGION,
    AWS_SECRET_ACCESS_KEY,
    IMS_TIMEOUT_SECONDS,
    MAINTENANCE_QUEUE,
    MAINTENANCE_QUEUE_URL,
    MARKET_JOBS_QUEUE,
    MARKET_JOBS_QUEUE_URL,
    SQS_CONNECT_TIMEOUT_SECONDS,
    SQS_MAX_ATTEMPTS,
    SQS_READ_TIMEOUT_SECONDS,
)

# --- Jobs ------------------------------------------------------------------------------------------------------
JOB_LEASE_TTL_SECONDS = env.int("JOB_LEASE_TTL_SECONDS", default=930)
# One delivery's whole budget: every call it makes gets its timeout from what is left of it.
JOB_TASK_TIME_LIMIT_SECONDS = env.int("JOB_TASK_TIME_LIMIT_SECONDS", default=900)
JOB_MAX_ATTEMPTS: int = env.int("JOB_MAX_ATTEMPTS", default=5)
JOB_RETRY_BASE_SECONDS = env.int("JOB_RETRY_BASE_SECONDS", default=30)
JOB_RETRY_MAX_SECONDS = env.int("JOB_RETRY_MAX_SECONDS", default=900)
JOB_HEARTBEAT_SECONDS = env.int("JOB_HEARTBEAT_SECONDS", default=60)
# Each worker process writes a heartbeat row this often while its consumer loop turns; three missed beats
# (60 s by default) and it no longer counts as alive: the probe's WorkersAlive, the doctor's no_consumer.
WORKER_HEARTBEAT_SECONDS = env.int("WORKER_HEARTBEAT_SECONDS", default=20)
# The row of a worker silent this long is deleted by the purge (and when a worker starts); until then the
# overview lists it as dead.
WORKER_HEARTBEAT_RETENTION_SECONDS = env.int("WORKER_HEARTBEAT_RETENTION_SECONDS", default=3600)
JOB_RECORD_TTL_DAYS = env.int("JOB_RECORD_TTL_DAYS", default=7)
JOB_ENQUEUE_GRACE_SECONDS = env.int("JOB_ENQUEUE_GRACE_SECONDS", default=60)
# How long one request putting a finished job back to work (a re-authorisation, a regeneration) may hold the
# job's reopen lock while it obtains a credential from IMS: the mint's worst case (three attempts that never
# connected, each bounded by the IMS timeout) with room.
JOB_REOPEN_LOCK_SECONDS = int(3 * IMS_TIMEOUT_SECONDS + 30)
# A job IN_PROGRESS with no activity (no claim, checkpoint, heartbeat or message) for longer than anything
# legitimate can take is stuck: a lease that ran out, then the longest retry delay.
JOB_STUCK_AFTER_SECONDS = env.int(
    "JOB_STUCK_AFTER_SECONDS", default=JOB_LEASE_TTL_SECONDS + min(JOB_RETRY_MAX_SECONDS, 900)
)
# On SIGTERM a worker takes no new message; deliveries still running this long after are handed back
# (lease released, a fresh message sent) so another worker resumes them from their last checkpoint.
WORKER_STOP_GRACE_SECONDS = env.float("WORKER_STOP_GRACE_SECONDS", default=10.0)
# ... but a delivery waiting on DRS (an LLM generation, paid per call) keeps waiting this long after the SIGTERM, and
# is handed back once its batch is persisted: a deploy re-runs no generation shorter than this. It must end inside
# the platform's stop timeout with room for the hand-backs (ECS allows 120 s; compose's stop_grace_period follows).
WORKER_STOP_DRAIN_SECONDS = env.float("WORKER_STOP_DRAIN_SECONDS", default=100.0)
# Generations in flight per worker process: its Celery thread pool. A delivery spends almost all its time
# waiting on DRS holding no database connection (the pool, DB_POOL_MAX_SIZE, serves its short database work),
# so threads are cheap; docs/worker.md says how to size it. SQLite (the embedded run) takes one writer at a
# time: a few threads there.
WORKER_CONCURRENCY = env.int("WORKER_CONCURRENCY", default=8 if DB_POOL_MAX_SIZE == 0 else 512)
# Connections a process keeps open to one service (IMS, Semrush, DRS) through its shared HTTP client: one per
# thread that may call it at once.
HTTP_MAX_CONNECTIONS = env.int("HTTP_MAX_CONNECTIONS", default=max(100, WORKER_CONCURRENCY))
# Fairness across organizations, decided at claim time across every worker (jobs/leases.py): while jobs of
# other organizations wait, an organization holds at most JOB_ORG_FAIR_SHARE running generations; alone, it
# may use every worker. 0 turns the rule off. A delivery held back by it is acknowledged and its job sent
# again as a fresh message delayed JOB_FAIR_HOLD_SECONDS: no attempt spent, no receive counted towards the DLQ.
JOB_ORG_FAIR_SHARE = env.int("JOB_ORG_FAIR_SHARE", default=48)
JOB_FAIR_HOLD_SECONDS = env.int("JOB_FAIR_HOLD_SECONDS", default=10)
# The fleet's DRS budget, decided at claim time across every worker (jobs/leases.py): at most this many
# generations hold a lease at once, which bounds the DRS (Lambda) invocations in flight (but for a call handed
# back mid-way by a stopping worker, or given up on our side while Lambda still runs it). The default leaves
# head-room under an account's default regional Lambda concurrency of 1,000. 0 turns it off. A delivery over
# the budget is held back like one over its fair share (a fresh message delayed JOB_FAIR_HOLD_SECONDS).
DRS_MAX_IN_FLIGHT = env.int("DRS_MAX_IN_FLIGHT", default=900)
# A throttled call (Lambda throttling, Semrush 429) is back-pressure, not a failure: the delivery gives its attempt
# back and the job is sent again after the service's Retry-After (without one: JOB_FAIR_HOLD_SECONDS doubling per
# throttle), never more than JOB_THROTTLE_MAX_DELAY_SECONDS. A run throttled JOB_MAX_THROTTLES times ends FAILED
# THROTTLED_TOO_LONG (re-runnable); from its JOB_THROTTLE_PERSISTENT_AFTER-th throttle on, each one is counted in
# JobsThrottledPersistently, the metric to alarm on.
JOB_THROTTLE_MAX_DELAY_SECONDS = env.int("JOB_THROTTLE_MAX_DELAY_SECONDS", default=120)
JOB_MAX_THROTTLES = env.int("JOB_MAX_THROTTLES", default=40)
JOB_THROTTLE_PERSISTENT_AFTER = env.int("JOB_THROTTLE_PERSISTENT_AFTER", default=10)
METRICS_NAMESPACE = "SpacecatSerenityMarketWorker"
# What a client does when called inside a database transaction (serenity/clients/guard.py): `raise` in
# local runs and tests, so the mistake fails loudly; `log` (an error line) in deployments.
NETWORK_CALL_IN_TRANSACTION = env.str("NETWORK_CALL_IN_TRANSACTION", default="raise" if IS_LOCAL else "log")

# --- Celery on SQS ---------------------------------------------------------------------------------------------
_endpoint = urlsplit(AWS_ENDPOINT_URL) if AWS_ENDPOINT_URL else None
_credentials = (
    {"access_key_id": AWS_ACCESS_KEY_ID, "secret_access_key": AWS_SECRET_ACCESS_KEY} if AWS_ACCESS_KEY_ID else {}
)
CELERY_BROKER_URL = env.str(
    "CELERY_BROKER_URL", default=f"sqs://{_endpoint.hostname}:{_endpoint.port}" if _endpoint else "sqs://"
)
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "region": AWS_REGION,
    "is_secure": bool(_endpoint is None or _endpoint.scheme == "https"),
    "wait_time_seconds": env.int("SQS_WAIT_TIME_SECONDS", default=10),
    # Pause between receive cycles: a worker thread that finishes waits at most this long for its next job
    # (1 s left 8 threads idle a third of the time; a long poll keeps an empty queue at one receive per wait).
    "polling_interval": env.float("SQS_POLLING_INTERVAL", default=0.1),
    # The botocore client kombu sends with: bounded, so a publish in a request thread cannot hang.
    "client-config": {
        "connect_timeout": SQS_CONNECT_TIMEOUT_SECONDS,
        "read_timeout": SQS_READ_TIMEOUT_SECONDS,
        "retries": {"mode": "standard", "total_max_attempts": SQS_MAX_ATTEMPTS},
    },
    "predefined_queues": {
        MARKET_JOBS_QUEUE: {"url": MARKET_JOBS_QUEUE_URL, **_credentials},
        MAINTENANCE_QUEUE: {"url": MAINTENANCE_QUEUE_URL, **_credentials},
    },
}
CELERY_TASK_DEFAULT_QUEUE = MARKET_JOBS_QUEUE
CELERY_TASK_ROUTES = {
    "jobs.sweep_unsent": {"queue": MAINTENANCE_QUEUE},
    "jobs.purge_expired": {"queue": MAINTENANCE_QUEUE},
}
# A failed publish is reported at once (the producer fails the job ENQUEUE_FAILED, a re-send is left for
# the sweeper) rather than retried inside a request thread.
CELERY_TASK_PUBLISH_RETRY = False
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_TASK_ACKS_ON_FAILURE_OR_TIMEOUT = False
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_WORKER_CONCURRENCY = WORKER_CONCURRENCY
CELERY_WORKER_ENABLE_REMOTE_CONTROL = False
CELERY_WORKER_SEND_TASK_EVENTS = False
CELERY_TASK_SEND_SENT_EVENT = False
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_TASK_TIME_LIMIT = JOB_TASK_TIME_LIMIT_SECONDS
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

# --- Beat: schedules kept in the database (django-celery-beat), so a restart never resets them ------------------
CELERY_BEAT_SCHEDULER = "serenity.beat:Scheduler"
# Run inside beat itself, not through a queue: the probe must report when no worker is alive.
BEAT_INLINE_TASKS = ("jobs.probe",)
CELERY_BEAT_SCHEDULE = {
    "sweep-unsent-jobs": {"task": "jobs.sweep_unsent", "schedule": env.int("SWEEP_EVERY_SECONDS", default=60)},
    # Every minute: WorkersAlive and the queue metrics must page within minutes of the last worker dying.
    "probe-stuck-jobs": {"task": "jobs.probe", "schedule": env.int("PROBE_EVERY_SECONDS", default=60)},
    "purge-expired-jobs": {
        "task": "jobs.purge_expired",
        "schedule": crontab(*env.str("PURGE_CRONTAB", default="15 3 * * *").split()),
    },
}

# --- The waiting poll (GET …/generation/jobs/{jobId}?wait=N; jobs/job_changes.py) -------------------------------------
# The longest wait a poll may ask for, in seconds: under every proxy's idle timeout (60 s) and the worker's.
POLL_WAIT_MAX_SECONDS = 25
# How often a waiting poll re-reads the job when nothing can wake it: on SQLite, and on PostgreSQL while the
# process's listener is (re)connecting.
POLL_WAIT_INTERVAL_SECONDS = env.float("POLL_WAIT_INTERVAL_SECONDS", default=0.5)
# A change of a job's progress alone answers a waiting poll this long after it (a change of status, at once), so
# the burst of phases at a job's end reaches a waiting UI as one answer.
POLL_WAIT_SETTLE_SECONDS = env.float("POLL_WAIT_SETTLE_SECONDS", default=1.0)
# Waiting polls one API process holds at once; one more answers at once as a plain poll (with Retry-After), so
# waiters can never take the threads ordinary requests need: serenity/gunicorn.py adds this many threads to
# GUNICORN_THREADS (docs/api.md).
POLL_WAIT_MAX_WAITERS = env.int("POLL_WAIT_MAX_WAITERS", default=640)
# A caller's share of them: the waits of one process one user (the bearer's user id) may hold at once, and one
# organization (the one the poll's path names); a wait beyond either answers at once as a plain poll, so one
# caller holding waits cannot leave none for another tenant (docs/api.md "Waiting for a change").
POLL_WAIT_MAX_WAITERS_PER_USER = env.int("POLL_WAIT_MAX_WAITERS_PER_USER", default=64)
POLL_WAIT_MAX_WAITERS_PER_ORG = env.int("POLL_WAIT_MAX_WAITERS_PER_ORG", default=160)
# The listener proves its idle connection alive this often (a dropped one raises, and it reconnects).
POLL_LISTENER_PROBE_SECONDS = env.float("POLL_LISTENER_PROBE_SECONDS", default=10.0)
POLL_LISTENER_MAX_BACKOFF_SECONDS = env.float("POLL_LISTENER_MAX_BACKOFF_SECONDS", default=8.0)
