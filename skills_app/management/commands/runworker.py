"""`runworker` with Skillscope's worker: Channels' command plus the worker's registration,
heartbeat, sweep and queue (see `skills_app.runs.workers`)."""

from __future__ import annotations

import faulthandler
import signal
from typing import Any

from channels.management.commands.runworker import Command as ChannelsRunworker

from skills_app.runs.workers import RunWorker


class ServiceRunWorker(RunWorker):
    # As a process of its own, stop cleanly on SIGTERM (systemd) and SIGINT (Ctrl-C).
    handle_signals = True


class Command(ChannelsRunworker):
    help = (
        "Run a Channels worker on the given channels (`runworker skillscope-runs` claims queued "
        "agent runs and executes them); it also marks runs of dead workers as interrupted."
    )
    worker_class = ServiceRunWorker

    def handle(self, *args: Any, **options: Any) -> None:
        # `kill -USR1 <pid>` writes every thread's stack to the log: what a worker that does not
        # stop, or stops answering, is doing (the tests send it before they give up on one).
        faulthandler.register(signal.SIGUSR1, all_threads=True)
        super().handle(*args, **options)
