"""Statements the ORM compiles once per shape: a job delivery's hot writes, built and compiled by Django the first
time, then run with each call's values.

Building a QuerySet and compiling it costs several times what running the statement costs (a fenced checkpoint's
UPDATE: ~350 µs of CPU to build and compile, ~60 µs to run), and a delivery sends the same few statements every
time (its claim, its checkpoints, its history rows, the fence of each Semrush write). `Compiled` keeps the
statement written once, in the ORM, and keeps Django's own SQL for the database in use: the first call of a
shape compiles it twice, with the call's values and with markers in their place, and learns which parameter
is which value; later calls substitute their values for the parameters that were values.

It learns only what it can prove: a parameter that is neither the same in both compilations (a constant of the
statement) nor exactly one marker that the first compilation passed through unchanged (the value itself) leaves
that shape to the ORM for good. On PostgreSQL the ORM passes UUIDs, datetimes, strings and numbers through to
psycopg as they are; on SQLite it converts them to text, so there every call compiles (as the plain ORM does).
A JSON value (a dict or a list) is passed wrapped, in psycopg's `Jsonb` with the field's `dumps`: a parameter that
wraps that very object, and whose marked compilation wraps the marker itself, is that value, wrapped the same way
for each later call.

What the SQL itself depends on besides the values is the shape: the values' types, which are None (compiled as
`IS NULL` or `NULL`), the booleans and the tuples are part of it; the caller names the rest (`fixed`: a LIMIT).
"""

import datetime
import threading
import uuid
from collections.abc import Callable, Hashable, Sequence
from typing import Any, cast

from django.db import connections, transaction
from django.db.models import Model, QuerySet
from django.db.models.query import ModelIterable
from django.db.models.sql import DeleteQuery, InsertQuery, UpdateQuery

try:  # the ORM's JSON parameters on PostgreSQL (psycopg 3); without psycopg no parameter is one
    from psycopg.types.json import _JsonWrapper
except ImportError:  # pragma: no cover

    class _JsonWrapper:  # type: ignore[no-redef]
        obj: Any
        dumps: Any


Build = Callable[..., tuple[str, Sequence[Any]]]

_UNKNOWN = object()


def as_uuid(value: Any) -> uuid.UUID | None:
    """`value` as the UUID the ORM would pass for a UUID column (text parsed), None kept: what a compiled
    statement's UUID parameter must be to be substituted (a text value would leave its shape to the ORM)."""
    return value if value is None or isinstance(value, uuid.UUID) else uuid.UUID(str(value))


def update_sql(queryset: QuerySet, **values: Any) -> tuple[str, Sequence[Any]]:
    """The SQL and parameters `queryset.update(**values)` would send, without sending them."""
    query = cast(UpdateQuery, queryset.query.chain(UpdateQuery))
    query.add_update_values(values)
    query.annotations = {}
    return query.get_compiler(queryset.db).as_sql()


def delete_sql(queryset: QuerySet) -> tuple[str, Sequence[Any]]:
    """The SQL and parameters of the one DELETE `queryset.delete()` sends when it deletes without collecting (a model
    no other row points to and no signal watches: `QuerySet._raw_delete`), without sending it."""
    query = queryset.query.chain(DeleteQuery)
    return query.get_compiler(queryset.db).as_sql()


def insert_sql(model: type[Model], using: str = "default", **values: Any) -> tuple[str, Sequence[Any]]:
    """The SQL and parameters `model.objects.create(**values)` would send for its row, without reading anything
    back (no RETURNING): every field but an automatic primary key, those not in `values` at their defaults."""
    obj = model(**values)
    fields = [f for f in model._meta.local_concrete_fields if f is not model._meta.auto_field]
    query = InsertQuery(model)
    query.insert_values(fields, [obj])
    [(sql, params)] = query.get_compiler(using).as_sql()
    return sql, params


class Compiled:
    """One statement, built by `build(**values)` (returning its SQL and parameters, from `update_sql` or
    `insert_sql`), compiled once per shape and database."""

    def __init__(self, build: Build):
        self.build = build
        self._templates: dict[Hashable, _Template | None] = {}
        self._lock = threading.Lock()

    def statement(
        self, *, fixed: dict[str, Hashable] | None = None, using: str = "default", **values: Any
    ) -> tuple[str, list[Any]]:
        """The SQL and parameters for `values`; `fixed` are arguments of `build` that the SQL depends on beyond
        its parameters (a LIMIT): each of their values is a shape of its own."""
        fixed = fixed or {}
        return self._statement(_key(using, fixed, values), fixed, values)

    def _statement(self, key: Hashable, fixed: dict[str, Hashable], values: dict[str, Any]) -> tuple[str, list[Any]]:
        template = self._templates.get(key, _UNKNOWN)
        if template is _UNKNOWN:
            sql, params = self.build(**fixed, **values)
            learnt = _Template.learn(lambda **v: self.build(**fixed, **v), values, sql, params)
            with self._lock:
                self._templates[key] = learnt
            return sql, list(params)
        if template is None:
            sql, params = self.build(**fixed, **values)
            return sql, list(params)
        assert isinstance(template, _Template)
        return template.sql, template.params(values)

    def execute(self, *, fixed: dict[str, Hashable] | None = None, using: str = "default", **values: Any) -> int:
        """Run the statement for `values`; the rows it changed (as `QuerySet.update` answers)."""
        sql, params = self.statement(fixed=fixed, using=using, **values)
        with transaction.mark_for_rollback_on_error(using), connections[using].cursor() as cursor:
            cursor.execute(sql, params)
            return int(cursor.rowcount)


def select_sql(queryset: QuerySet) -> tuple[str, Sequence[Any]]:
    """The SQL and parameters of `queryset`'s SELECT, without sending it."""
    return queryset.query.get_compiler(queryset.db).as_sql()


class CompiledRead:
    """A read of at most one row, built by `build(**values)` as a QuerySet (of model instances, or a `values_list`;
    sliced `[:1]`), compiled once per shape as `Compiled` does; `first` answers what the QuerySet's first row would
    be, or None. Its rows are decoded as the ORM decodes them (JSON, SQLite's dates), with the same compiler's
    converters."""

    def __init__(self, build: Callable[..., QuerySet]):
        self.build = build
        self.statement = Compiled(lambda **values: select_sql(build(**values)))
        self._decoders: dict[Hashable, Callable[[tuple], Any]] = {}

    def first(self, *, fixed: dict[str, Hashable] | None = None, using: str = "default", **values: Any) -> Any:
        fixed = fixed or {}
        key = _key(using, fixed, values)
        sql, params = self.statement._statement(key, fixed, values)
        with connections[using].cursor() as cursor:
            cursor.execute(sql, params)
            row = cursor.fetchone()
        if row is None:
            return None
        decode = self._decoders.get(key)
        if decode is None:
            decode = self._decoders[key] = self._decoder(self.build(**fixed, **values), using)
        return decode(row)

    @staticmethod
    def _decoder(queryset: QuerySet, using: str) -> Callable[[tuple], Any]:
        connection = connections[using]
        compiler = queryset.query.get_compiler(using)
        compiler.as_sql()
        columns = [column for column, _sql, _alias in compiler.select]
        converters = list(compiler.get_converters(columns).items())
        model = queryset.model if issubclass(queryset._iterable_class, ModelIterable) else None
        attnames = [column.target.attname for column in columns] if model else []

        def decode(row: tuple) -> Any:
            values = list(row)
            for index, (functions, expression) in converters:
                for convert in functions:
                    values[index] = convert(values[index], expression, connection)
            return model.from_db(using, attnames, values) if model else tuple(values)

        return decode


def _key(using: str, fixed: dict[str, Hashable], values: dict[str, Any]) -> Hashable:
    return (
        connections[using].vendor,
        *sorted(fixed.items()),
        *(_kind(name, value) for name, value in sorted(values.items())),
    )


class _Template:
    def __init__(self, sql: str, slots: list[tuple[str | None, Any]]):
        self.sql = sql
        # Per parameter: (the value's name, None), (None, a constant of the statement), or (the value's name, the JSON
        # wrapper type and `dumps` the ORM used): the value wrapped the same way.
        self.slots = slots
        self._plain = all(name is None or wrapper is None for name, wrapper in slots)

    def params(self, values: dict[str, Any]) -> list[Any]:
        if self._plain:
            return [constant if name is None else values[name] for name, constant in self.slots]
        return [
            constant if name is None else values[name] if constant is None else constant[0](values[name], constant[1])
            for name, constant in self.slots
        ]

    @classmethod
    def learn(cls, build: Build, values: dict[str, Any], sql: str, params: Sequence[Any]) -> "_Template | None":
        """Which of `params` (compiled from `values`) is which value, proven by a second compilation with
        markers; None when it cannot be proven for every parameter."""
        markers = {
            name: _marker(value, index) for index, (name, value) in enumerate(values.items()) if not _fixed(value)
        }
        if any(marker is None for marker in markers.values()):
            return None
        try:
            marked_sql, marked_params = build(**{**values, **markers})
        except Exception:  # a marker the ORM refuses (text where it parses a UUID): the value is not the parameter
            return None
        if marked_sql != sql or len(marked_params) != len(params):
            return None
        slots: list[tuple[str | None, Any]] = []
        for param, marked in zip(params, marked_params, strict=True):
            if isinstance(param, _JsonWrapper) or isinstance(marked, _JsonWrapper):
                # The ORM's JSON wrapper around the very value in both compilations, with the same `dumps`.
                names = [name for name, marker in markers.items() if _wraps(marked, marker)]
                if len(names) != 1 or not _wraps(param, values[names[0]]):
                    return None
                if type(param) is not type(marked) or param.dumps is not marked.dumps:
                    return None
                slots.append((names[0], (type(param), param.dumps)))
                continue
            names = [name for name, marker in markers.items() if _same(marked, marker)]
            if not names and _same(param, marked):
                slots.append((None, param))
            elif len(names) == 1 and _same(param, values[names[0]]):
                slots.append((names[0], None))
            else:
                return None
        return cls(sql, slots)


def _wraps(param: Any, value: Any) -> bool:
    """`param` is a JSON wrapper around `value` itself (not a copy, not its text)."""
    return isinstance(param, _JsonWrapper) and param.obj is value


def _fixed(value: Any) -> bool:
    """A value that is part of the shape rather than a parameter: None (`IS NULL`, `NULL`), a boolean, a tuple
    (the keys a checkpoint removes: one parameter each)."""
    return value is None or isinstance(value, (bool, tuple))


def _kind(name: str, value: Any) -> tuple[str, type, Any]:
    return (name, type(value), value if _fixed(value) else None)


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _marker(value: Any, index: int) -> Any:
    """A value of `value`'s type that no call passes, or None for a type markers are not made for."""
    if isinstance(value, uuid.UUID):
        return uuid.uuid4()
    if isinstance(value, datetime.datetime):
        return datetime.datetime(1901, 1, 1, 0, 0, index % 60, 123457 + index, tzinfo=value.tzinfo)
    if isinstance(value, str):
        return f"\x00marker {index} {uuid.uuid4().hex}"
    if isinstance(value, int):
        return -(10**15) - index
    if isinstance(value, dict):
        return {"\x00marker": index, "id": uuid.uuid4().hex}
    if isinstance(value, list):
        return ["\x00marker", index, uuid.uuid4().hex]
    return None
