"""Which processes load the model SDK: those that call a model, when they start; no other."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _sdk_loaded_after(code: str, tmp_path: Path) -> bool:
    probe = f"{code}\nimport sys\nprint('anthropic' in sys.modules)"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.settings"}
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
