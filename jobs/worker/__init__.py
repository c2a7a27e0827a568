"""The worker process's runtime around job deliveries, as Celery bootsteps, one subject a module:

- connections.py     a delivery never starts on a database connection dropped while the worker sat idle
- stop.py            a warm stop (SIGTERM) hands back what is still running after WORKER_STOP_GRACE_SECONDS
- last_receives.py   a stopping worker answers, and runs, what its last SQS receives bring
- receive_errors.py  an SQS error answer to a receive is an empty receive: the worker polls again
- intake.py          receives ask for no more job messages than the fleet's DRS budget has places for
- heartbeats.py      every worker process keeps a heartbeat row while its consumer loop turns

`install` names the steps on the Celery app; Celery loads each when it builds a worker, once Django is set up.
The runtime builds on the job core (jobs/services/runner.py runs each delivery); the core never imports it.
"""

from celery import Celery

# Steps of the worker itself (started and stopped around the consumer and its pool).
WORKER_STEPS = (
    "jobs.worker.connections:FreshConnections",
    "jobs.worker.stop:GracefulStop",
    "jobs.worker.last_receives:FinishLastReceives",
    "jobs.worker.receive_errors:ReceiveErrors",
)
# Steps of its consumer (started each time the consumer connects to the broker).
CONSUMER_STEPS = (
    "jobs.worker.heartbeats:WorkerHeartbeatStep",
    "jobs.worker.intake:BudgetIntakeStep",
)


def install(app: Celery) -> None:
    """Add the worker's runtime to `app` (serenity/celery.py calls it): every worker it builds, the suite's
    included, runs these steps. Steps are named, not imported, so installing needs no Django set-up."""
    app.steps["worker"].update(WORKER_STEPS)
    app.steps["consumer"].update(CONSUMER_STEPS)
