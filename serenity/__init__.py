"""Serenity market provisioning: the Django project package."""

from serenity.celery import app as celery_app

__all__ = ("celery_app",)
