"""The entry point's wiring: what runs are handed by the features above them.

Runs never import a feature (DESIGN "Shape of the code"); what the chat does when a run ends, and the trigger tests a worker also claims are handed to them here, once,
when the app is ready (`SkillsAppConfig.ready`), in every process: web, worker and commands.
Telemetry subscribes to the runs' events here too (`runs.observers`), when it is configured.
"""

from __future__ import annotations


def wire() -> None:
    from django.conf import settings

    from skills_app.chat import followups
    from skills_app.runs import wiring
    from skills_app.triggers import executor as trigger_tests

    wiring.wire(
        after_run=followups.AFTER_RUN,
        worker_duties=(trigger_tests,),
    )
    # Telemetry watches runs as an observer; off unless an OTLP endpoint is configured.
    from skills_app.telemetry.setup import install_from_settings

    install_from_settings(settings.TELEMETRY_INCLUDE_HIDDEN_TEXT)
