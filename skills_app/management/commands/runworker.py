"""`runworker` with Skillscope's worker: Channels' command plus the sweep for orphaned runs."""

from __future__ import annotations

from channels.management.commands.runworker import Command as ChannelsRunworker

from skills_app.runs.workers import RunWorker


class Command(ChannelsRunworker):
    help = (
        "Run a Channels worker on the given channels (`runworker skillscope-runs` executes agent "
        "runs); it also marks runs whose worker died as interrupted."
    )
    worker_class = RunWorker
