"""Time to first token on the multi-process deployment (run by bench/bench_ttft.py, not collected).

2 web processes and 2 workers against PostgreSQL and Redis, as tests/multiprocess/conftest.py
starts them; bench/live.py's fake model; BENCH_TRIALS messages one after the other, each in its
own conversation, half through each web process. The bare SDK is measured first, in the same run.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.live import _SETUP, FakeModel, machine
from bench.ttft import summary, tab_trial
from tests.multiprocess.conftest import PUBLIC_HOST, ROOT, Deployment

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(1800)]

TRIALS = int(os.environ.get("BENCH_TRIALS", "20"))
RESULT = os.environ.get("BENCH_RESULT", "")


async def test_time_to_first_token(deployment: Deployment) -> None:
    from bench.bench_ttft import bare

    with FakeModel() as model:
        sdk = await asyncio.to_thread(bare, model.url, TRIALS)
        deployment.env.update(
            ANTHROPIC_BASE_URL=model.url,
            # One user sends every trial's message: the per-user limits would refuse the 21st.
            RATE_LIMIT_MESSAGES_PER_MINUTE="100000",
            RATE_LIMIT_CONCURRENT_RUNS="100000",
            LOG_LEVEL="INFO",
        )
        # A setting to compare (bench/bench_ttft.py --env NAME=VALUE), as bench_load.py takes it.
        deployment.env.update(json.loads(os.environ.get("BENCH_ENV") or "{}"))
        setup = subprocess.run(
            [sys.executable, "-c", _SETUP.format(n=TRIALS + 2)],
            cwd=ROOT,
            env={**deployment.env, "DJANGO_SETTINGS_MODULE": "webapp.settings"},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert setup.returncode == 0, setup.stderr[-3000:]
        data = json.loads(setup.stdout.strip().splitlines()[-1])
        webs, workers = ["web-a", "web-b"], ["worker-1", "worker-2"]
        for name in webs:
            deployment.spawn_web(name)
        for name in workers:
            deployment.spawn_worker(name)
        deployment.wait_ready(*webs, *workers)
        headers = {"Host": PUBLIC_HOST, "Origin": f"https://{PUBLIC_HOST}"}
        ours = []
        try:
            for position, conversation in enumerate(data["conversations"]):
                port = deployment.ports[webs[position % 2]]
                marks = await tab_trial(port, conversation, data["session"], headers)
                if position >= 2:  # one warm-up through each web process
                    ours.append(marks)
        except BaseException:
            print(deployment.all_logs())
            raise
    result = {"mode": "2 web + 2 workers", "machine": machine(), **summary(sdk, ours)}
    print(json.dumps(result, indent=2))
    if RESULT:
        Path(RESULT).write_text(json.dumps(result, indent=2))
    assert len(ours) == TRIALS
