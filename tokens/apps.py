"""Tokens: IMS promise tokens, client pairs, encryption at rest, mint / exchange / invalidate."""

from django.apps import AppConfig


class TokensConfig(AppConfig):
    name = "tokens"
