"""factory-boy factory for async jobs."""

import uuid

import factory
from django.utils import timezone

from jobs.models import AsyncJob, JobStatus


class AsyncJobFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = AsyncJob

    id = factory.LazyFunction(uuid.uuid4)
    job_type = "testEcho"
    status = JobStatus.IN_PROGRESS
    organization_id = factory.LazyFunction(uuid.uuid4)
    brand_id = factory.LazyFunction(uuid.uuid4)
    user_id = "user-1"
    params = factory.LazyFunction(dict)
    created_at = factory.LazyFunction(timezone.now)
    updated_at = factory.LazyFunction(timezone.now)
