"""The worker's runtime is installed once, on the Celery app (jobs/worker/__init__.py `install`): every worker the
app builds, the suite's own included, runs its steps."""

import pytest

from jobs.worker import CONSUMER_STEPS, WORKER_STEPS


def step_names(blueprint) -> set[str]:
    return {f"{type(step).__module__}:{type(step).__name__}" for step in blueprint.steps.values()}


@pytest.mark.worker
def test_every_worker_the_app_builds_runs_the_workers_runtime(celery_worker):
    assert set(WORKER_STEPS) <= step_names(celery_worker.blueprint)
    assert set(CONSUMER_STEPS) <= step_names(celery_worker.consumer.blueprint)
