"""A Python process with Django set up once, running scripts against a server's database.

Tests that must read or write another process's database (the browser tests' live server, the
multi-process deployment's PostgreSQL) used to start `python -c SCRIPT` for every script: each
start sets Django up and imports the app again, about 1.5 s of CPU, a few hundred times a run.
A `DjangoHost` starts that process once per environment and hands it one script at a time:

    host = DjangoHost(env, cwd)
    out = host.run("print(User.objects.count())")   # what the script printed
    host.close()

Each script runs in fresh globals, with what it prints captured, and every database connection
is closed after it (a later database restart cannot leave the next script a dead connection;
each script sees the database as a new process would). A script that raises fails `run` with
its traceback, and the host goes on serving.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import threading
import traceback
from pathlib import Path
from typing import IO, Any

__all__ = ["DjangoHost", "DjangoHostError"]


# How long a new host may take to start (Python and Django's set-up) on a loaded machine.
STARTUP_SECONDS = 120.0


class DjangoHostError(RuntimeError):
    """A script failed (its traceback is the message), or the host process is gone."""


class DjangoHost:
    """One long-lived `python -m tests.support.django_host` serving scripts in order."""

    def __init__(self, env: dict[str, str], cwd: Path, *, timeout: float = 120) -> None:
        self.env = dict(env)
        self.cwd = cwd
        self.timeout = timeout
        self._lock = threading.Lock()
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        self._process: subprocess.Popen[str] | None = None

    def run(self, script: str) -> str:
        """Run `script` (Django is set up); what it printed. Raises DjangoHostError if it fails.

        A host that died is started again; one that did not answer in time (or whose answer
        could not be read) is killed, so no late answer can be taken for the next script's.
        """
        with self._lock:
            process = self._started()
            assert process.stdin is not None and process.stdout is not None
            try:
                process.stdin.write(json.dumps({"script": script}) + "\n")
                process.stdin.flush()
                answer = _read_line(process.stdout, self.timeout)
                if not answer:
                    raise DjangoHostError(f"the host process is gone:\n{self._log()}")
                result: dict[str, Any] = json.loads(answer)
            except BaseException as error:
                self._stop(kill=True)
                if isinstance(error, OSError | ValueError):
                    raise DjangoHostError(f"the host failed ({error}):\n{self._log()}") from error
                raise
        if not result["ok"]:
            raise DjangoHostError(f"{result['error']}\nprinted:\n{result['stdout'][-3000:]}")
        return str(result["stdout"])

    def close(self) -> None:
        with self._lock:
            self._stop(kill=False)
        self._stderr.close()

    def _started(self) -> subprocess.Popen[str]:
        if self._process is not None and self._process.poll() is not None:
            self._stop(kill=True)  # it died: its pipes go, a new one starts
        if self._process is None:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "tests.support.django_host"],
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                text=True,
            )
            # Start-up (Python, Django's set-up) is not the script's time: it is waited for
            # on its own, so `timeout` measures the script alone, however busy the machine.
            assert self._process.stdout is not None
            try:
                ready = _read_line(self._process.stdout, STARTUP_SECONDS)
            except TimeoutError as error:
                self._stop(kill=True)
                raise DjangoHostError(
                    f"the host did not start ({error}):\n{self._log()}"
                ) from error
            if not ready:
                self._stop(kill=True)
                raise DjangoHostError(f"the host process did not start:\n{self._log()}")
        return self._process

    def _stop(self, *, kill: bool) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if kill:
            process.kill()
        elif process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()  # end of input: the host returns
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
        for pipe in (process.stdin, process.stdout):
            if pipe is not None and not pipe.closed:
                with contextlib.suppress(OSError):
                    pipe.close()

    def _log(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-4000:]


def _read_line(stream: IO[str], timeout: float) -> str:
    """One line from the host, or "" if it closed; a host that does not answer is an error."""
    box: list[str] = []
    reader = threading.Thread(target=lambda: box.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    if reader.is_alive():
        raise TimeoutError(f"the host did not answer within {timeout:g} s")
    return box[0]


def _serve() -> None:
    # Answers go out on the original stdout; anything else the process writes there (a C
    # extension, a stray print outside a script) goes to stderr instead of into an answer.
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    import django

    django.setup()
    from django.db import connections

    answers.write(json.dumps({"ready": True}) + "\n")

    for line in sys.stdin:
        script = json.loads(line)["script"]
        printed = io.StringIO()
        ok, error = True, ""
        try:
            with contextlib.redirect_stdout(printed):
                exec(compile(script, "<script>", "exec"), {"__name__": "__script__"})
        except BaseException:  # noqa: BLE001 - reported to the test, the host goes on
            ok, error = False, traceback.format_exc()
        finally:
            connections.close_all()
        answers.write(json.dumps({"ok": ok, "stdout": printed.getvalue(), "error": error}) + "\n")


if __name__ == "__main__":
    _serve()
