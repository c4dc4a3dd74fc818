"""Operating Skillscope: health probes for load balancers and systemd, and structured logs.

Nothing here imports models at import time: `logcontext` and `logformat` are loaded by the
LOGGING setting before Django's apps are ready.
"""
