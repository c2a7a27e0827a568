"""The Celery application: configuration comes from Django settings (CELERY_* names)."""

import os
import warnings

from celery import Celery, signals

# kombu's SQS transport imports pycurl, which warns about two deprecated constants on import.
warnings.filterwarnings("ignore", category=DeprecationWarning, module="kombu.asynchronous.http.curl")
warnings.filterwarnings("ignore", message=".*(IOCTLFUNCTION|socket_all).*", category=DeprecationWarning)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "serenity.settings")

app = Celery("serenity")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# A stopping worker waits for the SQS receive it has in flight, so no message is swallowed by it
# (jobs/worker/last_receives.py).
app.steps["worker"].add("jobs.worker.last_receives:FinishPolls")
# An SQS 5xx or timeout on a receive ends the whole worker inside kombu; it polls again instead
# (jobs/worker/receive_errors.py).
app.steps["worker"].add("jobs.worker.receive_errors:ReceiveErrors")


@signals.worker_init.connect
def refuse_to_start_on_failed_checks(**kwargs):
    """A worker whose configuration breaks the timeout nesting (or any system check) does not start."""
    from django.core import checks

    errors = [e for e in checks.run_checks(include_deployment_checks=False) if e.is_serious()]
    if errors:
        raise SystemExit("Refusing to start the worker:\n" + "\n".join(f"  {e.id}: {e.msg}" for e in errors))
