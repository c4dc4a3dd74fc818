"""Operating Skillscope: health probes for load balancers and systemd, and structured logs.

Nothing here imports models at import time: `logformat` (and `core.logcontext`, which tags records
with their run; it sits in the core so that runs may use it) are loaded by the LOGGING setting
before Django's apps are ready.
"""
