"""The test helper that runs scripts in one long-lived Django process (tests/support/django_host)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.django_host import DjangoHost, DjangoHostError

ROOT = Path(__file__).resolve().parents[2]


def test_a_host_runs_scripts_in_fresh_globals_reports_failures_and_goes_on(tmp_path):
    host = DjangoHost({**os.environ, "SKILLSCOPE_VAR_DIR": str(tmp_path)}, ROOT)
    try:
        assert host.run("from django.apps import apps\nprint(apps.ready, 6 * 7)") == "True 42\n"
        with pytest.raises(DjangoHostError, match="ZeroDivisionError") as failed:
            host.run("print('before')\n1 / 0")
        assert "before" in str(failed.value)  # what it printed comes with the traceback
        host.run("left_over = 1")
        with pytest.raises(DjangoHostError, match="NameError"):
            host.run("print(left_over)")
        assert host.run("print('still serving')") == "still serving\n"
    finally:
        host.close()


def test_a_host_that_hangs_or_dies_is_replaced_and_no_late_answer_is_taken(tmp_path):
    host = DjangoHost({**os.environ, "SKILLSCOPE_VAR_DIR": str(tmp_path)}, ROOT, timeout=2)
    try:
        # The script under test hangs (it would answer after 30 s): the host is killed.
        with pytest.raises(DjangoHostError, match="did not answer within 2 s"):
            host.run("import time\ntime.sleep(30)\nprint('late')")
        assert host.run("print('next')") == "next\n"
        with pytest.raises(DjangoHostError, match="gone"):
            host.run("import os\nos._exit(3)")
        assert host.run("print('after')") == "after\n"
    finally:
        host.close()
