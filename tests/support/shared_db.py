"""Rows shared by the tests of one module: made once, in a transaction rolled back at its end.

pytest-django wraps each test in a transaction of its own; opened inside this one, it nests as a
savepoint, so what a test writes is undone after it and the next test sees the shared rows as
they were made. Transactional tests (`django_db(transaction=True)`) cannot run inside it: a
module that uses it keeps them elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from django.db import transaction
from django.test import Client, override_settings

T = TypeVar("T")


@contextmanager
def module_transaction(django_db_blocker: Any, build: Callable[[], T]) -> Iterator[T]:
    """What `build` makes, kept while the block runs and rolled back when it ends."""
    # The tests' fast hasher (tests/conftest.py sets it per test, after this runs).
    hashers = override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"])
    with django_db_blocker.unblock():
        outer = transaction.atomic()
        outer.__enter__()
        try:
            with hashers:
                made = build()
        except BaseException:
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)
            raise
    try:
        yield made
    finally:
        with django_db_blocker.unblock():
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)


def session_of(user: Any) -> str:
    """A signed-in session of `user` (its cookie's value), to hand to clients made later."""
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


def signed_in_client(session: str | None, **options: Any) -> Client:
    """A fresh client carrying an existing session (none: anonymous); no login is written."""
    client = Client(**options)
    if session is not None:
        client.cookies["sessionid"] = session
    return client
