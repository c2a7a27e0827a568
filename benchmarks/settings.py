"""The product's settings plus one bare authenticated endpoint, the poll's baseline (benchmarks/urls.py)."""

from serenity.settings import *  # noqa: F403

ROOT_URLCONF = "benchmarks.urls"
