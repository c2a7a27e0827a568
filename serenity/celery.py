"""The Celery application: configuration comes from Django settings (CELERY_* names)."""
import os
import warnings

from celery import Celery

# kombu's SQS transport imports pycurl, which warns about two deprecated constants on import.
warnings.filterwarnings("ignore", category=DeprecationWarning, module="kombu.asynchronous.http.curl")
warnings.filterwarnings("ignore", message=".*(IOCTLFUNCTION|socket_all).*", category=DeprecationWarning)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "serenity.settings")

app = Celery("serenity")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
