"""Skillscope settings, read from the environment.

Every variable is documented in `.env.example`. The helpers of `webapp/env.py` fail loudly on a
value they cannot read, so a typo stops start-up instead of silently changing behaviour. One
section per concern, in the order a deployment is set up: Django itself, skills, the model,
tools, runs, trigger tests, uploads, Git sources, telemetry, attachments, audit, the
organisation's limits, sign-in.
"""

from __future__ import annotations

import os
import secrets
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url
import django_stubs_ext
from django.core.exceptions import ImproperlyConfigured
from django.http.request import validate_host

# Plain Python (no Django): the model table's defaults, so they are spelled in one place.
from skills_app.core.model_catalog import DEFAULT_MODEL, DEFAULT_OFFERED_MODELS
from webapp.env import (
    check_heartbeat,
    env_bool,
    env_bool_or_auto,
    env_choice,
    env_float,
    env_int,
    env_list,
    env_secret,
    env_str,
    env_usd,
)
from webapp.publicurl import PublicURLError, host_of, public_url
from webapp.signin import oidc_app, saml_app

# Generic admin and form classes (ModelAdmin[Run], ModelForm[Rule]) subscriptable at run time.
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent

# --- Core Django: secrets, hosts, HTTPS, content security -----------------------------------

DEBUG = env_bool("DEBUG", False)
VAR_DIR = Path(env_str("SKILLSCOPE_VAR_DIR", str(BASE_DIR / "var")))

SECRET_KEY = env_secret("SECRET_KEY")
if not SECRET_KEY:
    # A local install without SECRET_KEY gets a random key kept in var/, so sessions survive
    # restarts; a production deployment sets SECRET_KEY (or SECRET_KEY_FILE) explicitly.
    _key_file = VAR_DIR / "secret_key"
    try:
        SECRET_KEY = _key_file.read_text().strip()
    except FileNotFoundError:
        _key_file.parent.mkdir(parents=True, exist_ok=True)
        SECRET_KEY = secrets.token_urlsafe(50)
        _key_file.write_text(SECRET_KEY)
        _key_file.chmod(0o600)

# Rotating the secret key: the keys it replaces, still accepted for what they signed (sessions,
# password-reset links) until those expire; whitespace-separated, or one per line in the file
# SECRET_KEY_FALLBACKS_FILE names (docs/deploy.md, "Rotating the secret key").
SECRET_KEY_FALLBACKS = env_secret("SECRET_KEY_FALLBACKS").split()

# The address people use, and the start of every absolute URL Skillscope prints or builds.
try:
    SKILLSCOPE_PUBLIC_URL = public_url(os.environ)
except PublicURLError as exc:
    raise ImproperlyConfigured(str(exc)) from None
_public_host = host_of(SKILLSCOPE_PUBLIC_URL)
if env_str("SKILLSCOPE_PUBLIC_URL"):
    # Served under a chosen name (behind a proxy): that name, and only it, by default.
    ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", [_public_host])
    CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [SKILLSCOPE_PUBLIC_URL])
    if not validate_host(_public_host, ALLOWED_HOSTS):
        raise ImproperlyConfigured(
            f"ALLOWED_HOSTS={','.join(ALLOWED_HOSTS)!r} does not include {_public_host!r}, the host of "
            f"the public URL {SKILLSCOPE_PUBLIC_URL}: every page would answer 400 Bad Request. "
            "Add it to ALLOWED_HOSTS, or leave ALLOWED_HOSTS unset to derive it."
        )
else:
    _local = ["127.0.0.1", "localhost", "[::1]"]
    ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", list(dict.fromkeys([*_local, _public_host])))
    CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
SECURE_COOKIES = env_bool("SECURE_COOKIES", False)
SESSION_COOKIE_SECURE = SECURE_COOKIES
CSRF_COOKIE_SECURE = SECURE_COOKIES
if env_bool("BEHIND_TLS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Redirect plain-HTTP requests to HTTPS (the proxy usually does; this is the backstop).
# The /healthz and /readyz probes are answered before it (skills_app.ops.middleware).
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
# Strict-Transport-Security max-age; set it (e.g. 31536000) once the site is served only over HTTPS.
SECURE_HSTS_SECONDS = env_int("HSTS_SECONDS", 0, minimum=0)
# With HSTS: also for every subdomain of this host, and the `preload` token (docs/deploy.md).
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("HSTS_PRELOAD", False)
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
# Content-Security-Policy (django-csp). Scripts only from this site: a prompt-injected answer
# cannot run code. Images only from this site or data: URLs: an answer's external image is a
# link (chat/rendering.py), never a zero-click request carrying data to another host. Inline
# styles stay allowed (the Django admin's change list and htmx's indicator style use them).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        # 'self' covers ws:/wss: to this host (CSP Level 3) for the chat's websocket.
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

# --- Apps, middleware, URLs, templates ------------------------------------------------------

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    # Before "channels": its `runworker` command adds the stale-run sweep to Channels' own.
    "skills_app",
    "channels",
    "django_htmx",
    "csp",
]

MIDDLEWARE = [
    # First: /healthz and /readyz answer probes before host validation and the HTTPS redirect.
    "skills_app.ops.middleware.ProbeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Times are shown in the signed-in person's own time zone (detected by their browser).
    "skills_app.chat.preferences.UserTimeZoneMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "webapp.urls"
WSGI_APPLICATION = None
ASGI_APPLICATION = "webapp.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "skills_app.context_processors.skillscope",
            ],
        },
    },
]

# --- Database and channel layer -------------------------------------------------------------

# A thread keeps its connection (CONN_MAX_AGE=None) and Django tests a kept one before its next
# use (CONN_HEALTH_CHECKS). The database work of websockets and runs shares one thread for the
# process's life, and a worker's liveness work another: each holds one connection instead of
# opening one per call (a server process each on PostgreSQL). Django's `close_old_connections`,
# which Channels' `database_sync_to_async` runs around every call, closes one an error or an
# unfinished transaction left behind, and the health check replaces one a PostgreSQL restart
# broke before a query meets it.
# HTTP requests are the exception: Django's ASGI handler runs each request's database work on a
# thread of its own that asgiref ends with the request. A connection kept there is never used
# again but stays open until the garbage collector finds it, one more per request (Django ticket
# 33497); webapp/asgi.py closes it when the request ends.
DATABASE_URL = env_secret("DATABASE_URL")
if DATABASE_URL:
    DATABASES = {
        "default": dj_database_url.parse(DATABASE_URL, conn_max_age=None, conn_health_checks=True)
    }
else:
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(Path(env_str("SQLITE_PATH", str(VAR_DIR / "db.sqlite3")))),
            # Waiting for the write lock beats failing when a run and a view write at once. WAL:
            # readers never block the writer, and a commit is a write, not two flushes (20 ms on
            # a VM disk); the live text's journal commits several times a second (runs/streams).
            "OPTIONS": {
                "timeout": 20,
                "transaction_mode": "IMMEDIATE",
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
            "CONN_MAX_AGE": None,
            "CONN_HEALTH_CHECKS": True,
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_secret("REDIS_URL")
REDIS_CONNECTIONS = env_int("REDIS_CONNECTIONS", 4, minimum=1)
if REDIS_URL:
    from webapp.redis_layer import redis_host

    CHANNEL_LAYERS = {
        "default": {
            # channels-redis's pub/sub layer, waiting out a Redis outage (webapp/redis_layer.py):
            # a tab opens meanwhile, live frames are dropped (tabs fill gaps from the database),
            # one log line when Redis is lost and one when it is back.
            "BACKEND": "webapp.redis_layer.RedisChannelLayer",
            # One entry per connection: the stock layer sends on a host's connection one message
            # at a time (a round trip each), and a group always goes through the same entry, so
            # its messages stay in order. Several entries for the one Redis let a worker's
            # streams go out side by side.
            "CONFIG": {"hosts": [redis_host(REDIS_URL) for _ in range(REDIS_CONNECTIONS)]},
        }
    }
else:
    # Channels' in-memory layer. A tab's channel holds 1,000 messages (Channels' default is
    # 100): about 30 s of one busy answer before a tab that falls behind misses live frames (its
    # consumer then fills the gap from the database).
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels.layers.InMemoryChannelLayer",
            "CONFIG": {"capacity": 1000},
        }
    }

# --- Passwords, language, time --------------------------------------------------------------

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "/accounts/login/"
# Signing in lands on a conversation ready for a message (an unused one is reused).
LOGIN_REDIRECT_URL = "/c/start/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

# --- Static files and media -----------------------------------------------------------------

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(VAR_DIR / "static")))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns on every start without it
# WhiteNoise serves static files from the finders too, so a local run needs no collectstatic.
WHITENOISE_USE_FINDERS = True
# After `manage.py collectstatic`, STATIC_MANIFEST=true serves compressed files with hashed names
# and far-future cache headers (production). Without collectstatic it must stay off.
STATIC_MANIFEST = env_bool("STATIC_MANIFEST", False)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if STATIC_MANIFEST
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}
MEDIA_ROOT = Path(env_str("MEDIA_ROOT", str(VAR_DIR / "media")))

# --- Logging --------------------------------------------------------------------------------

# Logs go to stderr (journald under systemd). LOG_FORMAT=json writes one JSON object per line;
# records logged while a run executes carry run_id and conversation_id (skills_app.core.logcontext).
LOG_FORMAT = env_choice("LOG_FORMAT", "text", ("text", "json"))
LOG_LEVEL = env_choice(
    "LOG_LEVEL", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"), upper=True
)
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"run_context": {"()": "skills_app.core.logcontext.RunContextFilter"}},
    "formatters": {
        "text": {"format": "%(asctime)s %(levelname)s %(name)s%(log_context)s: %(message)s"},
        "json": {"()": "skills_app.ops.logformat.JsonFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": LOG_FORMAT,
            "filters": ["run_context"],
        }
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {"django.channels.server": {"level": "WARNING"}},
}

# --- Skills ---------------------------------------------------------------------------------

BUNDLED_SKILLS_DIR = BASE_DIR / "skills"
# Extra skill folders, os.pathsep-separated (":" on Linux), scanned after the bundled ones.
SKILLS_DIRS = [Path(p) for p in env_list("SKILLS_DIRS", [], sep=os.pathsep)]
SKILL_CATALOG_BUDGET = env_int("SKILL_CATALOG_BUDGET", 15_000, minimum=200)
SKILL_CATALOG_ENTRY_CAP = env_int("SKILL_CATALOG_ENTRY_CAP", 1_536, minimum=20)
DISABLE_SKILL_SHELL = env_bool("DISABLE_SKILL_SHELL", False)
# system-prompt profile: loaded skills, selected documents and tools last for the turn that
# loaded them (the design's temporary state) or, with "conversation", until it ends.
SKILL_STATE_LIFETIME = env_choice("SKILL_STATE_LIFETIME", "turn", ("turn", "conversation"))
# tool-result profile: substitute $ARGUMENTS, ${CLAUDE_SKILL_DIR}... in the <skill> block (the
# design returns the body as written, so this is off by default).
TOOL_RESULT_SUBSTITUTIONS = env_bool("TOOL_RESULT_SUBSTITUTIONS", False)

# --- Model ----------------------------------------------------------------------------------

ANTHROPIC_API_KEY = env_secret("ANTHROPIC_API_KEY")
ANTHROPIC_BASE_URL = env_str("ANTHROPIC_BASE_URL")
# The model of new conversations, and the models offered in the picker (comma-separated ids).
# The default model is always offered. `manage.py check` refuses ids not in
# skills_app/core/model_catalog.py, listing the valid ones.
ANTHROPIC_MODEL = env_str("ANTHROPIC_MODEL", DEFAULT_MODEL)
ANTHROPIC_MODELS = env_list("ANTHROPIC_MODELS", list(DEFAULT_OFFERED_MODELS))
if ANTHROPIC_MODEL not in ANTHROPIC_MODELS:
    ANTHROPIC_MODELS = [ANTHROPIC_MODEL, *ANTHROPIC_MODELS]
# Defaults of a new conversation: adaptive thinking on/off, and its effort (empty: the model's own
# default, "high"). Models without a setting never receive it.
ANTHROPIC_THINKING = env_bool("ANTHROPIC_THINKING", True)
ANTHROPIC_EFFORT = env_str("ANTHROPIC_EFFORT", "").strip().lower()
# Cache breakpoints on the stable prefix and the conversation (prompt caching); off only to measure.
ANTHROPIC_PROMPT_CACHING = env_bool("ANTHROPIC_PROMPT_CACHING", True)
ANTHROPIC_MAX_TOKENS = env_int("ANTHROPIC_MAX_TOKENS", 8192, minimum=1)
ANTHROPIC_MAX_RETRIES = env_int("ANTHROPIC_MAX_RETRIES", 2, minimum=0)
ANTHROPIC_TIMEOUT = env_float("ANTHROPIC_TIMEOUT", 600.0)
# The factory (a dotted path to a callable with no arguments) that builds each run's model client:
# by default Claude when ANTHROPIC_API_KEY is set, else the offline demo model.
MODEL_CLIENT = env_str("MODEL_CLIENT", "skills_app.runs.client.default_client")
# Seconds between the demo model's streamed chunks (so its answers stream like a real model's).
DEMO_MODEL_DELAY = env_float("DEMO_MODEL_DELAY", 0.02)
AGENT_MAX_TURNS = env_int("AGENT_MAX_TURNS", 30, minimum=1)
# Dotted paths of hook callables per event, e.g. AGENT_HOOKS_PRE_TOOL_USE=myhooks.block_rm
AGENT_HOOKS = {
    "UserPromptSubmit": env_list("AGENT_HOOKS_USER_PROMPT_SUBMIT", []),
    "PreToolUse": env_list("AGENT_HOOKS_PRE_TOOL_USE", []),
    "PostToolUse": env_list("AGENT_HOOKS_POST_TOOL_USE", []),
    "Stop": env_list("AGENT_HOOKS_STOP", []),
}

# --- Permissions, approvals, workspace, tools -----------------------------------------------

APPROVAL_TIMEOUT = env_int("APPROVAL_TIMEOUT", 600, minimum=1)
WORKSPACE_ROOT = Path(env_str("WORKSPACE_ROOT", str(VAR_DIR / "workspaces")))
BASH_TIMEOUT_DEFAULT = env_int("BASH_TIMEOUT_DEFAULT", 120, minimum=1)
BASH_TIMEOUT_MAX = env_int("BASH_TIMEOUT_MAX", 600, minimum=1)
BASH_OUTPUT_LIMIT = env_int("BASH_OUTPUT_LIMIT", 30_000, minimum=1_000)
# auto: bubblewrap when it works, else none; without a sandbox only holders of the "run unsandboxed
# commands" permission may run commands (docs/security.md).
SANDBOX = env_choice("SANDBOX", "auto", ("auto", "bwrap", "none"))
# MCP servers (docs/mcp.md): seconds to start and greet a server, seconds one call may take,
# characters of a result the model gets (head and tail), seconds a server's tool list is reused.
MCP_CONNECT_TIMEOUT = env_float("MCP_CONNECT_TIMEOUT", 10.0)
MCP_CALL_TIMEOUT = env_float("MCP_CALL_TIMEOUT", 60.0)
MCP_RESULT_LIMIT = env_int("MCP_RESULT_LIMIT", 100_000, minimum=1_000)
MCP_LIST_CACHE_SECONDS = env_int("MCP_LIST_CACHE_SECONDS", 300, minimum=0)
# A server's session is kept open for the next call until idle this many seconds (0: a session
# per call), per event loop, server, and conversation (stdio) or person (OAuth); at most
# MCP_SESSIONS_MAX of them per event loop, the least recently used closed first.
MCP_SESSION_IDLE_SECONDS = env_float("MCP_SESSION_IDLE_SECONDS", 300.0)
MCP_SESSIONS_MAX = env_int("MCP_SESSIONS_MAX", 32, minimum=1)
# Bytes of one image or embedded resource of a result kept in out/ for the person to see.
MCP_MEDIA_MAX_BYTES = env_int("MCP_MEDIA_MAX_BYTES", 5 * 1024 * 1024, minimum=1_024)
# OAuth servers: discovery, registration, token requests and the sign-in redirect refuse
# private, loopback and link-local addresses unless this is on (an internal authorization server).
MCP_OAUTH_ALLOW_PRIVATE_ADDRESSES = env_bool("MCP_OAUTH_ALLOW_PRIVATE_ADDRESSES", False)
# MCP calls one person may make a minute, in all their conversations (docs/mcp.md).
MCP_CALLS_PER_MINUTE = env_int("MCP_CALLS_PER_MINUTE", 60, minimum=1)
# Seconds a server's question mid-call waits for the person's answer before it is cancelled.
MCP_ELICIT_TIMEOUT = env_float("MCP_ELICIT_TIMEOUT", 300.0)

# --- Runs -----------------------------------------------------------------------------------

RUN_EXECUTOR = env_choice("RUN_EXECUTOR", "inline", ("inline", "worker"))
if RUN_EXECUTOR == "worker" and not REDIS_URL:
    raise ImproperlyConfigured(
        "RUN_EXECUTOR=worker queues runs for `manage.py runworker skillscope-runs` and relays "
        "their events through Redis: set REDIS_URL too (or use RUN_EXECUTOR=inline)."
    )
# The executing process touches Run.heartbeat_at this often; a run whose heartbeat is older than
# RUN_STALE_SECONDS is taken as orphaned (its process died) and marked interrupted.
RUN_HEARTBEAT_SECONDS = env_float("RUN_HEARTBEAT_SECONDS", 5.0)
RUN_STALE_SECONDS = env_float("RUN_STALE_SECONDS", 30.0)
# Each worker registers itself and beats every WORKER_HEARTBEAT_SECONDS (for its runs too); a
# worker silent for WORKER_STALE_SECONDS is dead and its runs are marked interrupted (workers and
# web processes look every quarter of a heartbeat). WORKER_MAX_RUNS caps the runs one worker
# executes at once (0: no cap); the others wait in the queue for a free worker.
WORKER_HEARTBEAT_SECONDS = env_float("WORKER_HEARTBEAT_SECONDS", 1.5)
WORKER_STALE_SECONDS = env_float("WORKER_STALE_SECONDS", 3.5)
WORKER_MAX_RUNS = env_int("WORKER_MAX_RUNS", 10, minimum=0)


check_heartbeat(
    "RUN_HEARTBEAT_SECONDS", RUN_HEARTBEAT_SECONDS, "RUN_STALE_SECONDS", RUN_STALE_SECONDS
)
check_heartbeat(
    "WORKER_HEARTBEAT_SECONDS",
    WORKER_HEARTBEAT_SECONDS,
    "WORKER_STALE_SECONDS",
    WORKER_STALE_SECONDS,
)
# A worker touches its runs' heartbeats with its own, so runs must tolerate its pace too.
check_heartbeat(
    "WORKER_HEARTBEAT_SECONDS", WORKER_HEARTBEAT_SECONDS, "RUN_STALE_SECONDS", RUN_STALE_SECONDS
)
RATE_LIMIT_MESSAGES_PER_MINUTE = env_int("RATE_LIMIT_MESSAGES_PER_MINUTE", 20, minimum=1)
RATE_LIMIT_CONCURRENT_RUNS = env_int("RATE_LIMIT_CONCURRENT_RUNS", 3, minimum=1)
# Messages one conversation may hold queued while a run is busy (each is sent when it ends).
CHAT_MAX_QUEUED = env_int("CHAT_MAX_QUEUED", 5, minimum=1)
# The small model that titles a conversation after its first answer (with an API key); empty:
# "none": titles are made from the first message without a model call (as with the demo model).
CHAT_TITLE_MODEL = env_str("CHAT_TITLE_MODEL", "claude-haiku-4-5")
if CHAT_TITLE_MODEL.lower() == "none":
    CHAT_TITLE_MODEL = ""

# --- Trigger tests --------------------------------------------------------------------------

# Repetitions of each query in a trigger run (default, and the most the page accepts); model
# calls of one run in flight at once; trigger runs one worker executes at once.
TRIGGER_MAX_REPETITIONS = env_int("TRIGGER_MAX_REPETITIONS", 10, minimum=1)
TRIGGER_REPETITIONS = env_int("TRIGGER_REPETITIONS", 3, minimum=1)
if TRIGGER_REPETITIONS > TRIGGER_MAX_REPETITIONS:
    raise ImproperlyConfigured(
        f"TRIGGER_REPETITIONS={TRIGGER_REPETITIONS} is more than TRIGGER_MAX_REPETITIONS="
        f"{TRIGGER_MAX_REPETITIONS}: lower the first or raise the second."
    )
TRIGGER_CONCURRENCY = env_int("TRIGGER_CONCURRENCY", 3, minimum=1)
TRIGGER_RUNS_PER_WORKER = env_int("TRIGGER_RUNS_PER_WORKER", 2, minimum=1)

# --- Uploads --------------------------------------------------------------------------------

# Users may upload skills visible only to themselves (the "Skills" page); admins upload for everyone.
ALLOW_PERSONAL_SKILLS = env_bool("ALLOW_PERSONAL_SKILLS", True)
UPLOAD_MAX_TOTAL_BYTES = env_int("UPLOAD_MAX_TOTAL_BYTES", 30 * 1024 * 1024, minimum=1024)
UPLOAD_MAX_FILES = env_int("UPLOAD_MAX_FILES", 5_000, minimum=1)
UPLOAD_MAX_FILE_BYTES = env_int("UPLOAD_MAX_FILE_BYTES", 10 * 1024 * 1024, minimum=1024)
UPLOAD_MAX_RATIO = env_int("UPLOAD_MAX_RATIO", 100, minimum=1)
# Installed versions live in <root>/<package id>/<digest>/. Empty: MEDIA_ROOT/skills, resolved
# when used, so a changed MEDIA_ROOT (tests, a second instance) moves the skills with it.
_skill_storage_root = env_str("SKILL_STORAGE_ROOT")
SKILL_STORAGE_ROOT: Path | None = Path(_skill_storage_root) if _skill_storage_root else None
# Organisation skill versions are approved by a skill manager before they go live for others
# (docs/review.md). True: the approver must be someone other than the uploader and the submitter.
# Unset (None): so whenever more than one active account may review; false: never.
SKILL_REVIEWER_MUST_DIFFER = env_bool_or_auto("SKILL_REVIEWER_MUST_DIFFER")
# A browser folder upload sends one form field per file; Django refuses more than this many.
DATA_UPLOAD_MAX_NUMBER_FILES = UPLOAD_MAX_FILES

# --- Skill sources (Git) --------------------------------------------------------------------

# Folders whose Git repositories may be sources (file:// or a path); empty: no local ones.
GIT_SOURCE_LOCAL_ROOTS = [Path(p) for p in env_list("GIT_SOURCE_LOCAL_ROOTS", [])]
# Plain http:// sources (anyone on the way could change the skills): off unless trusted.
GIT_SOURCE_ALLOW_HTTP = env_bool("GIT_SOURCE_ALLOW_HTTP", False)
# Hosts resolving to loopback, private or link-local addresses: off (they reach server state).
GIT_SOURCE_ALLOW_PRIVATE_HOSTS = env_bool("GIT_SOURCE_ALLOW_PRIVATE_HOSTS", False)
GIT_SOURCE_TIMEOUT_SECONDS = env_float("GIT_SOURCE_TIMEOUT_SECONDS", 60.0)
GIT_SOURCE_MAX_FETCH_BYTES = env_int("GIT_SOURCE_MAX_FETCH_BYTES", 200 * 1024 * 1024, minimum=1024)
# A sync that started this long ago and never finished (a killed process) no longer blocks one.
GIT_SOURCE_SYNC_STALE_SECONDS = env_int("GIT_SOURCE_SYNC_STALE_SECONDS", 900, minimum=60)

# --- Telemetry (OpenTelemetry; on when OTEL_EXPORTER_OTLP_ENDPOINT is set) ------------------

# Spans carry skill prompts, tool inputs and results and the messages sent to the model: off.
TELEMETRY_INCLUDE_HIDDEN_TEXT = env_bool("TELEMETRY_INCLUDE_HIDDEN_TEXT", False)

# --- Attachments (files attached to chat messages, saved in the workspace's in/) ------------

# Bytes of one attached file, and how many files one message may carry. Images up to ~3.7 MB and
# PDFs up to ~18 MB are also sent to the model as content blocks; larger ones only by path.
ATTACHMENT_MAX_FILE_BYTES = env_int("ATTACHMENT_MAX_FILE_BYTES", 10 * 1024 * 1024, minimum=1024)
ATTACHMENT_MAX_FILES = env_int("ATTACHMENT_MAX_FILES", 10, minimum=1)

# --- Audit ----------------------------------------------------------------------------------

# Minimum age, in days, before `manage.py audit purge` may remove audit rows; 0: keep forever.
AUDIT_RETENTION_DAYS = env_int("AUDIT_RETENTION_DAYS", 0, minimum=0)

# --- Organisation: groups, models, budgets, storage (docs/organisation.md) ------------------

# The models everyone may use (comma-separated ids within ANTHROPIC_MODELS); a group's policy
# adds more. Empty: every model of ANTHROPIC_MODELS.
SKILLSCOPE_DEFAULT_MODELS = env_list("SKILLSCOPE_DEFAULT_MODELS", [])
for _model in SKILLSCOPE_DEFAULT_MODELS:
    if _model not in ANTHROPIC_MODELS:
        raise ImproperlyConfigured(
            f"SKILLSCOPE_DEFAULT_MODELS names {_model!r}, which is not in ANTHROPIC_MODELS "
            f"({', '.join(ANTHROPIC_MODELS)}): add it there or remove it here."
        )
# Each person's spending limits in dollars (empty: none); an administrator can set other limits
# per person, and per group (the group's members together).
BUDGET_USER_DAILY_USD = env_usd("BUDGET_USER_DAILY_USD")
BUDGET_USER_MONTHLY_USD = env_usd("BUDGET_USER_MONTHLY_USD")
# A model call's reservation nobody settled (its process died) is charged in full after this.
BUDGET_RESERVATION_TTL = env_int("BUDGET_RESERVATION_TTL", 3600, minimum=60)
# Trigger runs started per person per hour (each can make hundreds of model calls).
RATE_LIMIT_TRIGGER_RUNS_PER_HOUR = env_int("RATE_LIMIT_TRIGGER_RUNS_PER_HOUR", 10, minimum=1)
# Bytes each person may keep in their conversations' files (attachments, work/, out/); 0: no quota.
STORAGE_QUOTA_BYTES = env_int("STORAGE_QUOTA_BYTES", 1_000_000_000, minimum=0)
# The most one command (or one file written by a tool) may add to a workspace.
STORAGE_RUN_WRITE_LIMIT = env_int("STORAGE_RUN_WRITE_LIMIT", 200_000_000, minimum=1024)

# --- Sign-in --------------------------------------------------------------------------------

# Local passwords (LOCAL_PASSWORDS), the organisation's identity provider through
# django-allauth (OpenID Connect; SAML 2.0 configured but tested only against its own metadata),
# and lockout after failed attempts (django-axes). docs/organisation.md says how to set them up.
INSTALLED_APPS += [
    "allauth",
    "allauth.account",
    "allauth.socialaccount",
    "allauth.socialaccount.providers.openid_connect",
    "allauth.socialaccount.providers.saml",
    "axes",
]
# allauth's middleware after authentication; axes' last (it turns a lockout into its response).
MIDDLEWARE.insert(
    MIDDLEWARE.index("django.contrib.auth.middleware.AuthenticationMiddleware") + 1,
    "allauth.account.middleware.AccountMiddleware",
)
MIDDLEWARE.insert(
    MIDDLEWARE.index("allauth.account.middleware.AccountMiddleware") + 1,
    "skills_app.accounts.middleware.SignInGateMiddleware",
)
MIDDLEWARE.append("axes.middleware.AxesMiddleware")
# One password backend for every form (the login page, the admin's, allauth's): it checks the
# lockout first and refuses every password when LOCAL_PASSWORDS=false.
AUTHENTICATION_BACKENDS = ["skills_app.accounts.backends.PasswordBackend"]

# false: nobody signs in with a password kept here (the identity provider only); every password
# form and URL says so. Set up the identity provider (and a directory group for administrators)
# before turning it off.
LOCAL_PASSWORDS = env_bool("LOCAL_PASSWORDS", True)
# "Forgot your password?" (while LOCAL_PASSWORDS is on) mails a reset link, valid for
# PASSWORD_RESET_TIMEOUT seconds, to the account's e-mail address. EMAIL_HOST set: through that
# SMTP server; unset: the mail is written to the server's log (a machine without mail).
EMAIL_HOST = env_str("EMAIL_HOST")
EMAIL_PORT = env_int("EMAIL_PORT", 587, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = env_secret("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", True)
EMAIL_BACKEND = (
    "django.core.mail.backends.smtp.EmailBackend"
    if EMAIL_HOST
    else "django.core.mail.backends.console.EmailBackend"
)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "Skillscope <skillscope@localhost>")
PASSWORD_RESET_TIMEOUT = env_int("PASSWORD_RESET_TIMEOUT", 3600, minimum=60)
# OpenID Connect: the issuer (its /.well-known/openid-configuration is read), the client
# registered there for Skillscope (redirect URI: <public URL>/accounts/oidc/sso/login/callback/).
SSO_OIDC_ISSUER = env_str("SSO_OIDC_ISSUER").rstrip("/")
SSO_OIDC_CLIENT_ID = env_str("SSO_OIDC_CLIENT_ID")
SSO_OIDC_CLIENT_SECRET = env_secret("SSO_OIDC_CLIENT_SECRET")
SSO_OIDC_SCOPES = env_list("SSO_OIDC_SCOPES", ["openid", "profile", "email", "groups"], sep=" ")
# SAML 2.0: the identity provider's metadata URL and Skillscope's entity id there.
SSO_SAML_METADATA_URL = env_str("SSO_SAML_METADATA_URL")
SSO_SAML_ENTITY_ID = env_str("SSO_SAML_ENTITY_ID")
# The button's words ("Sign in with NAME"); the claim (OIDC) or attribute (SAML) listing groups.
SSO_NAME = env_str("SSO_NAME", "your organisation")
SSO_GROUPS_CLAIM = env_str("SSO_GROUPS_CLAIM", "groups")
# Directory groups whose members may sign in (comma-separated; empty: everyone the provider signs
# in). People new to Skillscope get an account on their first sign-in unless SSO_CREATE_USERS=false.
SSO_ALLOWED_GROUPS = env_list("SSO_ALLOWED_GROUPS", [])
SSO_CREATE_USERS = env_bool("SSO_CREATE_USERS", True)
if SSO_OIDC_ISSUER and not (SSO_OIDC_CLIENT_ID and SSO_OIDC_CLIENT_SECRET):
    raise ImproperlyConfigured(
        "SSO_OIDC_ISSUER is set without SSO_OIDC_CLIENT_ID and SSO_OIDC_CLIENT_SECRET: register "
        "Skillscope as a client at the identity provider and set both (docs/organisation.md)."
    )
if not LOCAL_PASSWORDS and not (SSO_OIDC_ISSUER or SSO_SAML_METADATA_URL):
    raise ImproperlyConfigured(
        "LOCAL_PASSWORDS=false leaves no way to sign in: configure SSO_OIDC_ISSUER (or "
        "SSO_SAML_METADATA_URL) first, or keep local passwords."
    )
SOCIALACCOUNT_PROVIDERS: dict[str, object] = {
    "openid_connect": {
        "APPS": [
            oidc_app(
                issuer=SSO_OIDC_ISSUER,
                client_id=SSO_OIDC_CLIENT_ID,
                secret=SSO_OIDC_CLIENT_SECRET,
                name=SSO_NAME,
                scopes=SSO_OIDC_SCOPES,
            )
        ]
        if SSO_OIDC_ISSUER
        else []
    }
}
if SSO_SAML_METADATA_URL:
    SOCIALACCOUNT_PROVIDERS["saml"] = {
        "APPS": [
            saml_app(
                metadata_url=SSO_SAML_METADATA_URL,
                entity_id=SSO_SAML_ENTITY_ID
                or f"{SKILLSCOPE_PUBLIC_URL}/accounts/saml/sso-saml/metadata/",
                name=SSO_NAME,
            )
        ]
    }
# The sign-in button posts here and is redirected to the identity provider: the browser checks
# that redirect against the CSP's form-action, so the provider's origin is allowed there.
for _sso_url in (SSO_OIDC_ISSUER, SSO_SAML_METADATA_URL, *env_list("SSO_FORM_ACTION_ORIGINS", [])):
    if _sso_url:
        _parts = urlsplit(_sso_url)
        CONTENT_SECURITY_POLICY["DIRECTIVES"]["form-action"].append(
            f"{_parts.scheme}://{_parts.netloc}"
        )
ACCOUNT_ADAPTER = "skills_app.accounts.sso.LocalAccounts"
SOCIALACCOUNT_ADAPTER = "skills_app.accounts.sso.DirectoryAccounts"
ACCOUNT_LOGIN_METHODS = {"username"}
ACCOUNT_SIGNUP_FIELDS = ["username*", "email"]
ACCOUNT_EMAIL_VERIFICATION = "none"
ACCOUNT_LOGOUT_ON_GET = False
SOCIALACCOUNT_AUTO_SIGNUP = True
SOCIALACCOUNT_EMAIL_VERIFICATION = "none"
SOCIALACCOUNT_EMAIL_AUTHENTICATION = False  # a matching e-mail never takes over an account
SOCIALACCOUNT_STORE_TOKENS = False
SOCIALACCOUNT_LOGIN_ON_GET = False  # the sign-in button posts (CSRF), never a bare link

# Lockout: LOGIN_FAILURE_LIMIT wrong passwords lock the account (or the address, LOGIN_LOCKOUT_BY)
# for LOGIN_LOCKOUT_MINUTES (0: until an administrator lifts it). The lock holds for every way in:
# every password form, the identity provider and open chat tabs.
LOGIN_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5, minimum=1)
LOGIN_LOCKOUT_MINUTES = env_int("LOGIN_LOCKOUT_MINUTES", 15, minimum=0)
LOGIN_LOCKOUT_BY = env_choice(
    "LOGIN_LOCKOUT_BY", "username", ("username", "ip_address", "username+ip_address")
)
AXES_ENABLED = env_bool("AXES_ENABLED", True)
AXES_FAILURE_LIMIT = LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(minutes=LOGIN_LOCKOUT_MINUTES) if LOGIN_LOCKOUT_MINUTES else None
AXES_LOCKOUT_PARAMETERS = (
    [["username", "ip_address"]]
    if LOGIN_LOCKOUT_BY == "username+ip_address"
    else [LOGIN_LOCKOUT_BY]
)
AXES_RESET_ON_SUCCESS = True
# A lock lasts LOGIN_LOCKOUT_MINUTES from when it began: a guess during the lock does not restart
# it (the message can say when it ends, and a guesser cannot stretch it by guessing on).
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_LOCKOUT_CALLABLE = "skills_app.accounts.lockout.lockout_response"
# The client address is REMOTE_ADDR only: behind the proxy, daphne --proxy-headers has already
# set it from X-Forwarded-For of the trusted proxy; a header a client sends is never believed.
AXES_CLIENT_IP_CALLABLE = "skills_app.accounts.lockout.client_ip"
AXES_VERBOSE = False
if LOGIN_LOCKOUT_BY == "username":
    # axes warns that a lock without the address can be dodged by rotating user agents: that
    # holds for address locks only; a lock by username holds whatever the client sends.
    SILENCED_SYSTEM_CHECKS = ["axes.W006"]
