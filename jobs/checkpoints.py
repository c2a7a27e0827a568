"""Checkpoint writes that send only what changed: the job's checkpoints merged with new values in the database.

A job's checkpoints hold its persisted input (a market job's whole DRS batch) beside small progress marks. A
checkpoint that rewrote the whole document would send that batch again on every phase; `MergedCheckpoints`
sends the changed keys alone and lets the database merge them, on PostgreSQL (jsonb `||` and `-`) as on
SQLite (json_set, json_remove). Top-level keys are replaced, never merged deeper; a None value removes its key.
"""

import json
from typing import TYPE_CHECKING, Any

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import F, Func, JSONField
from django.db.models.sql.compiler import SQLCompiler

if TYPE_CHECKING:
    from django.db.models.sql.compiler import _AsSqlType


class MergedCheckpoints(Func):
    """The `checkpoints` column with `values` merged in, for an UPDATE."""

    output_field = JSONField()

    def __init__(self, values: dict[str, Any]) -> None:
        super().__init__(F("checkpoints"))
        self.sets_json, self.drops = split(values)

    @classmethod
    def encoded(cls, sets_json: str, drops: tuple[str, ...]) -> "MergedCheckpoints":
        """The merge of `split(values)`'s two parts: the keys set (as one JSON object's text) and those removed."""
        merged = cls({})
        merged.sets_json, merged.drops = sets_json, drops
        return merged

    def as_postgresql(self, compiler: SQLCompiler, connection: BaseDatabaseWrapper, **extra: Any) -> "_AsSqlType":
        column, params = compiler.compile(self.source_expressions[0])
        sql, params = f"(COALESCE({column}, '{{}}'::jsonb) || %s::jsonb)", (*params, self.sets_json)
        for key in self.drops:
            sql, params = f"({sql} - %s)", (*params, key)
        return sql, params

    def as_sqlite(self, compiler: SQLCompiler, connection: BaseDatabaseWrapper, **extra: Any) -> "_AsSqlType":
        column, params = compiler.compile(self.source_expressions[0])
        sql = f"COALESCE({column}, '{{}}')"
        sets = json.loads(self.sets_json)
        if sets:
            sql = f"json_set({sql}" + ", %s, json(%s)" * len(sets) + ")"
            for key, value in sets.items():
                params = (*params, _path(key), json.dumps(value))
        if self.drops:
            sql = f"json_remove({sql}" + ", %s" * len(self.drops) + ")"
            params = (*params, *(_path(key) for key in self.drops))
        return sql, params

    def as_sql(
        self,
        compiler: SQLCompiler,
        connection: BaseDatabaseWrapper,
        function: str | None = None,
        template: str | None = None,
        arg_joiner: str | None = None,
        **extra: Any,
    ) -> "_AsSqlType":
        raise NotImplementedError(f"checkpoint merge is not written for {connection.vendor}")


def split(values: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    """`values` as a merge sends them: the keys set, as one JSON object's text, and the keys a None removes."""
    sets = {key: value for key, value in values.items() if value is not None}
    return json.dumps(sets), tuple(key for key, value in values.items() if value is None)


def _path(key: str) -> str:
    """A JSON path naming one top-level key, quoted (keys are identifiers, but a quote must not break it)."""
    return "$." + json.dumps(key)
