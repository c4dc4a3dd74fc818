"""`runworker` with Skillscope's worker: Channels' command plus the worker's registration,
heartbeat, sweep and queue (see `skills_app.runs.workers`)."""

from __future__ import annotations

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
