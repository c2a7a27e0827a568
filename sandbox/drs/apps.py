"""Local drs simulator (mounted only when SANDBOX_ENABLED; never in production settings)."""

from django.apps import AppConfig


class Config(AppConfig):
    name = "sandbox.drs"
    label = "sandbox_drs"
    default = True
