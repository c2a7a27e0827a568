"""Fixtures of the onboarding and worker tests beside tests/conftest.py's `world` and `async_on`: the readiness
gate."""

import pytest


@pytest.fixture
def gate(moto_server):
    """Set the SSM readiness parameter for a test; restored to `true` afterwards."""
    from django.conf import settings

    from jobs import readiness
    from jobs.clients import ssm

    def set_value(value: str | None):
        if value is None:
            ssm.client().delete_parameter(Name=settings.READINESS_PARAMETER)
        else:
            readiness.readiness_set(value)
        readiness.reset_cache()

    yield set_value
    set_value("true")
