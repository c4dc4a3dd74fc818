"""ORM queries compiled once per database, then run again with new values: raw rows, cheaply.

Compiling a small queryset costs the ORM several times what running it costs (about 0.3 ms of
CPU against 0.05 ms for one row from SQLite), and a run's permission gate reads the same few
small tables at every tool call. A `Statement` keeps the queryset's SQL and parameters per
database (alias, vendor), compiled once with placeholder values standing for what changes (a
conversation's id, a person's id), and runs it with the real values in their place.

The rows are the database's own values: no field converter runs (a JSON or sealed field is its
stored text, a binary field its bytes or a memoryview). They serve as what a cache compares to
know it is still current, and as data only where the columns are plain (ids, text).

`Insert` does the same for the rows a tool call writes (its permission decision, its audit row).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, router
from django.db.models import Model
from django.db.models.signals import post_save, pre_save

# Ids no row has: the values a statement is compiled with, then found among its parameters.
PLACEHOLDERS = (-7_351_112_911, -7_351_112_913, -7_351_112_917)


class Statement:
    """`build(*placeholders, *shape)` (a values_list queryset) compiled once per database and
    shape: `shape` is what the SQL itself carries (a slice's LIMIT and OFFSET), not a value."""

    def __init__(self, build: Callable[..., Any], *, values: int = 0) -> None:
        if values > len(PLACEHOLDERS):
            raise ValueError(f"a statement takes at most {len(PLACEHOLDERS)} values")
        self.build = build
        self.values = values
        self._compiled: dict[tuple[Any, ...], tuple[str, tuple[Any, ...], tuple[int, ...]]] = {}
        self._lock = threading.Lock()

    def _statement(
        self, alias: str, vendor: str, shape: tuple[Any, ...]
    ) -> tuple[str, tuple[Any, ...], tuple[int, ...]]:
        slot = (alias, vendor, *shape)
        found = self._compiled.get(slot)
        if found is not None:
            return found
        placeholders = PLACEHOLDERS[: self.values]
        query = self.build(*placeholders, *shape).query
        sql, params = query.get_compiler(using=alias).as_sql()
        params = tuple(params)
        where: list[int] = []
        for value in placeholders:
            at = [i for i, p in enumerate(params) if p == value and type(p) is int]
            if len(at) != 1:
                raise RuntimeError(f"a statement's value appears {len(at)} times in: {sql}")
            where.append(at[0])
        with self._lock:
            if len(self._compiled) >= 64:  # shapes come from settings: a few at most
                self._compiled.clear()
            found = self._compiled[slot] = (sql, params, tuple(where))
        return found

    def rows(
        self, *values: int, shape: tuple[Any, ...] = (), using: str = DEFAULT_DB_ALIAS
    ) -> tuple[tuple[Any, ...], ...]:
        """The statement's rows with `values` in place of the placeholders."""
        if len(values) != self.values:
            raise TypeError(f"this statement takes {self.values} values, not {len(values)}")
        connection = connections[using]
        sql, params, where = self._statement(connection.alias, connection.vendor, shape)
        if where:
            filled = list(params)
            for at, value in zip(where, values, strict=True):
                filled[at] = int(value)
            params = tuple(filled)
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return tuple(tuple(row) for row in cursor.fetchall())


class Insert:
    """Rows of one model inserted with SQL built once per database: what `objects.create` does
    (defaults, `auto_now_add`, each field's own conversion for the database), without compiling
    the query each time. A model with a save() of its own, with save signals, or with a field
    the database fills (generated, a database default) is created through the ORM instead, so
    nothing is ever skipped."""

    def __init__(self, model: type[Model]) -> None:
        self.model = model
        self._sql: dict[tuple[str, str], str] = {}

    def _fields(self) -> list[Any]:
        meta = self.model._meta
        return [f for f in meta.local_concrete_fields if f is not meta.auto_field]

    def row(self, **values: Any) -> None:
        """Insert one row of these field values (nothing comes back: not even its id)."""
        model = self.model
        if (
            model.save is not Model.save
            or pre_save.has_listeners(model)
            or post_save.has_listeners(model)
            or any(f.generated or f.has_db_default() for f in self._fields())
        ):
            model.objects.create(**values)  # type: ignore[attr-defined]
            return
        instance = model(**values)
        connection = connections[router.db_for_write(model)]
        fields = self._fields()
        slot = (connection.alias, connection.vendor)
        sql = self._sql.get(slot)
        if sql is None:
            quote = connection.ops.quote_name
            columns = ", ".join(quote(f.column) for f in fields)
            marks = ", ".join(["%s"] * len(fields))
            sql = self._sql[slot] = (
                f"INSERT INTO {quote(model._meta.db_table)} ({columns}) VALUES ({marks})"
            )
        params = [f.get_db_prep_save(f.pre_save(instance, True), connection) for f in fields]
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
