"""SSM Parameter Store through boto3 (the consumer-readiness parameter)."""

from functools import lru_cache
from typing import Any

import boto3
from botocore.config import Config
from django.conf import settings

from serenity.clients.guard import guard_boto3_client


@lru_cache(maxsize=4)
def _client(endpoint: str, region: str, key: str, secret: str) -> Any:
    kwargs = {"region_name": region, "config": Config(retries={"max_attempts": 1}, connect_timeout=2, read_timeout=3)}
    if endpoint:
        kwargs["endpoint_url"] = endpoint
    if key:
        kwargs.update(aws_access_key_id=key, aws_secret_access_key=secret)
    return guard_boto3_client(boto3.client("ssm", **kwargs), "ssm")


def client() -> Any:
    """The SSM client. Typed Any: boto3 builds its clients at run time and ships no types for them."""
    return _client(
        settings.AWS_ENDPOINT_URL, settings.AWS_REGION, settings.AWS_ACCESS_KEY_ID, settings.AWS_SECRET_ACCESS_KEY
    )


def get_parameter(name: str) -> str:
    """The parameter's value. Raises botocore errors (ParameterNotFound included) to the caller."""
    value: str = client().get_parameter(Name=name)["Parameter"]["Value"]
    return value


def put_parameter(name: str, value: str) -> None:
    client().put_parameter(Name=name, Value=value, Type="String", Overwrite=True)
