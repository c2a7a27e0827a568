"""Django settings, all read from the environment (django-environ); every variable is in docker/.env.example.

Split by subject, each module reading its own variables: environment.py (which environment, how values are
read), django.py (Django, the API, security), services.py (IMS, Semrush, DRS, AWS), jobs.py (jobs, Celery,
beat), observability.py (logging). Local runs (SERENITY_ENVIRONMENT=local or test) get safe embedded
defaults; a deployment has no default for a value that cannot be safe and fails at start-up naming it.
"""

from serenity.settings.django import *  # noqa: F403
from serenity.settings.environment import *  # noqa: F403
from serenity.settings.jobs import *  # noqa: F403
from serenity.settings.observability import *  # noqa: F403
from serenity.settings.services import *  # noqa: F403
