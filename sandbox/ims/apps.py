"""Local ims simulator (mounted only when SANDBOX_ENABLED; never in production settings)."""

from django.apps import AppConfig


class Config(AppConfig):
    name = "sandbox.ims"
    label = "sandbox_ims"
    default = True
