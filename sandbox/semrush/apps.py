"""Local semrush simulator (mounted only when SANDBOX_ENABLED; never in production settings)."""

from django.apps import AppConfig


class Config(AppConfig):
    name = "sandbox.semrush"
    label = "sandbox_semrush"
    default = True
