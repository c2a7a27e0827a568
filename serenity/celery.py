"""The Celery application: configuration comes from Django settings (CELERY_* names)."""

import os
import warnings

from celery import Celery, signals
from kombu.utils.imports import symbol_by_name

# kombu's SQS transport imports pycurl, which warns about two deprecated constants on import.
warnings.filterwarnings("ignore", category=DeprecationWarning, module="kombu.asynchronous.http.curl")
warnings.filterwarnings("ignore", message=".*(IOCTLFUNCTION|socket_all).*", category=DeprecationWarning)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "serenity.settings")

app = Celery("serenity")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# The worker's runtime: its stop, its last receives, receive errors, the DRS-budget intake, heartbeats
# (jobs/worker/). Named, not imported, as settings name apps: serenity sits below jobs in the layers.
symbol_by_name("jobs.worker:install")(app)


@signals.worker_init.connect
def refuse_to_start_on_failed_checks(**kwargs):
    """A worker whose configuration breaks the timeout nesting (or any system check) does not start."""
    from django.core import checks

    errors = [e for e in checks.run_checks(include_deployment_checks=False) if e.is_serious()]
    if errors:
        raise SystemExit("Refusing to start the worker:\n" + "\n".join(f"  {e.id}: {e.msg}" for e in errors))
