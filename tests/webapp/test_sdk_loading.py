"""Which processes load the model's and MCP's SDKs (1.9 s and 0.8 s of CPU to import): those that
call a model load the first when they start; no process loads the second before it talks to a
server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _sdk_loaded_after(code: str, tmp_path: Path, sdk: str = "anthropic", **more: str) -> bool:
    probe = f"{code}\nimport sys\nprint({sdk!r} in sys.modules)"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.settings", **more}
    env["SKILLSCOPE_VAR_DIR"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1] == "True"


def test_setting_django_up_leaves_the_sdk_out_and_the_server_loads_it_at_start(tmp_path):
    # migrate, check and every other command: the models without the SDK's 1.3 s of imports.
    assert not _sdk_loaded_after(
        "import django\ndjango.setup()\nimport skills_app.models", tmp_path
    )
    # daphne's application: loaded before the first answer, not during it.
    assert _sdk_loaded_after("import webapp.asgi", tmp_path)


def test_a_web_process_whose_answers_run_in_workers_leaves_the_sdk_to_its_first_call(tmp_path):
    assert not _sdk_loaded_after(
        "import webapp.asgi", tmp_path, RUN_EXECUTOR="worker", REDIS_URL="redis://127.0.0.1:9/0"
    )


def test_no_start_up_loads_the_mcp_sdk(tmp_path):
    # Django, its URL configuration (the admin and the OAuth pages among it) and the server.
    code = (
        "import django\ndjango.setup()\n"
        "from django.urls import get_resolver\nget_resolver().url_patterns\n"
        "import webapp.asgi"
    )
    assert not _sdk_loaded_after(code, tmp_path, sdk="mcp")
