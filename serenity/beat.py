"""Celery beat's scheduler: the schedules live in the database (django-celery-beat, visible in the admin, kept
across restarts), and the tasks named in BEAT_INLINE_TASKS run inside beat itself instead of going through a
queue, so they still run when no worker is alive (the stuck-jobs probe must report exactly then)."""

import logging

from django.conf import settings
from django.db import close_old_connections
from django_celery_beat.schedulers import DatabaseScheduler

log = logging.getLogger(__name__)


class InlineResult:
    """What `apply_async` returns for a task run inline (beat only logs its id)."""

    id = "inline"


class Scheduler(DatabaseScheduler):
    def apply_async(self, entry, producer=None, advance=True, **kwargs):
        if entry.task not in settings.BEAT_INLINE_TASKS:
            return super().apply_async(entry, producer=producer, advance=advance, **kwargs)
        entry = self.reserve(entry) if advance else entry
        close_old_connections()
        try:
            self.app.tasks[entry.task].run(*(entry.args or ()), **(entry.kwargs or {}))
        except Exception:  # a failing probe must not stop beat scheduling everything else
            log.exception("inline beat task failed", extra={"task": entry.task})
        finally:
            close_old_connections()
        return InlineResult()
