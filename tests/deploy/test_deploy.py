"""deploy/ works as docs/deploy.md installs it: the env file as systemd reads it, the units, nginx."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.multiprocess import nginx
from tests.support.paths import REPO
from webapp import envfile
from webapp.configerror import EX_CONFIG

ROOT = REPO
DEPLOY = ROOT / "deploy"
GUIDE = ROOT / "docs" / "deploy.md"
ENV_FILE = DEPLOY / "skillscope.env"
# The process units (templates: one instance per port or worker number).
UNITS = sorted((DEPLOY / "systemd").glob("*@.service"))
NGINX_SITE = DEPLOY / "nginx" / "skillscope.conf"
INSTALL_ROOT = "/srv/skillscope"
# An ordinary Django secret: 68 characters, as `head -c 50 /dev/urandom | base64 -w0` makes.
SECRET = "q3Zx8f0Jm2kVb7Lr5Tn1Wc4Yh6Gd9Sa0Pe3Ku8Io2Mz7Xv5Bn1Cq4Rw6Ey9Tu0Ui3Op"


# -- the env file, read the way systemd's EnvironmentFile= reads it ----------------------------


def test_the_env_file_holds_nothing_systemd_would_misread():
    assert envfile.problems(ENV_FILE.read_text()) == []


def test_every_line_of_the_env_file_is_a_comment_a_blank_or_an_assignment():
    # A line systemd skips silently (no `=`, an invalid name) would be a setting that never applies.
    for number, line in enumerate(ENV_FILE.read_text().splitlines(), start=1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            assert re.fullmatch(r"[A-Z][A-Z0-9_]*=\S*", stripped), f"line {number}: {line!r}"


def test_every_variable_of_the_env_file_is_documented_in_env_example():
    documented = set(envfile.parse((ROOT / ".env.example").read_text()))
    documented |= {
        m.group(1)
        for m in re.finditer(r"^# ?([A-Z][A-Z0-9_]*)=", (ROOT / ".env.example").read_text(), re.M)
    }
    missing = set(envfile.load(ENV_FILE)) - documented
    assert not missing, f"not in .env.example: {sorted(missing)}"


def _service_env(tmp_path: Path, text: str) -> dict[str, str]:
    """TEXT as systemd loads it, with the files it names made under tmp_path."""
    variables = envfile.parse(text)
    for name, value in variables.items():
        if value.startswith("/"):
            # /etc/skillscope/secret_key -> tmp/etc/skillscope/secret_key, and so on.
            variables[name] = str(tmp_path / value.lstrip("/"))
    (tmp_path / "etc" / "skillscope").mkdir(parents=True, exist_ok=True)
    (tmp_path / "etc" / "skillscope" / "secret_key").write_text(SECRET + "\n")
    (tmp_path / "etc" / "skillscope" / "anthropic_api_key").write_text("")  # as the guide makes it
    return {"PATH": os.environ["PATH"], "HOME": str(tmp_path), **variables}


def _manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_is_clean_with_the_documented_settings(tmp_path):
    result = _manage(
        _service_env(tmp_path, ENV_FILE.read_text()), "check", "--deploy", "--fail-level", "DEBUG"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_without_preload_the_one_remaining_warning_is_the_one_the_guide_explains(tmp_path):
    text = ENV_FILE.read_text().replace("HSTS_PRELOAD=true", "HSTS_PRELOAD=false")
    result = _manage(_service_env(tmp_path, text), "check", "--deploy")
    warnings = set(re.findall(r"\((security\.W\d+)\)", result.stdout + result.stderr))
    assert warnings == {"security.W021"}
    assert "W021" in GUIDE.read_text()


def test_a_trailing_comment_stops_the_service_with_the_no_restart_status(tmp_path):
    # The failure issue 19 met: a shell-style comment after a value, read by systemd's rules.
    text = ENV_FILE.read_text().replace(
        "HSTS_SECONDS=31536000", "HSTS_SECONDS=31536000   # once HTTPS works"
    )
    result = _manage(_service_env(tmp_path, text), "check")
    assert result.returncode == EX_CONFIG
    assert "HSTS_SECONDS='31536000   # once HTTPS works' is not an integer" in result.stderr


def test_an_unreadable_secret_key_file_stops_the_service_with_the_no_restart_status(tmp_path):
    env = _service_env(tmp_path, ENV_FILE.read_text())
    env["SECRET_KEY_FILE"] = str(tmp_path / "missing")
    result = _manage(env, "check")
    assert result.returncode == EX_CONFIG
    assert "SECRET_KEY_FILE=" in result.stderr and "cannot be read" in result.stderr


def test_every_variable_the_settings_read_is_in_env_example():
    settings = (ROOT / "webapp" / "settings.py").read_text()
    read = set(re.findall(r"\benv_\w+\(\s*\"([A-Z][A-Z0-9_]*)\"", settings))
    read |= set(re.findall(r"os\.environ(?:\.get\(|\[)\s*\"([A-Z][A-Z0-9_]*)\"", settings))
    assert {"SECRET_KEY", "MCP_CALLS_PER_MINUTE", "MCP_ELICIT_TIMEOUT"} <= read  # the pattern
    example = (ROOT / ".env.example").read_text()
    documented = set(re.findall(r"^(?:# ?)?([A-Z][A-Z0-9_]*)=", example, re.M))
    missing = read - documented
    assert not missing, f"read by webapp/settings.py, not in .env.example: {sorted(missing)}"


def test_env_example_loads_by_the_same_rules(tmp_path):
    # run.sh reads a .env copied from it with these rules; every value must pass the settings.
    text = (ROOT / ".env.example").read_text()
    assert envfile.problems(text) == []
    env = {**_service_env(tmp_path, text), "SKILLSCOPE_VAR_DIR": str(tmp_path / "var")}
    result = _manage(env, "check")
    assert result.returncode == 0, result.stderr


# -- the systemd units --------------------------------------------------------------------------


def _unit(path: Path) -> dict[str, dict[str, list[str]]]:
    """Sections -> key -> values, by systemd.syntax(7): # and ; comments, backslash continuation."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    text = re.sub(r"\\\n", " ", path.read_text())
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            assert line.endswith("]"), f"{path.name}:{number}: {raw!r}"
            current = sections.setdefault(line[1:-1], {})
            continue
        assert current is not None and "=" in line, f"{path.name}:{number}: {raw!r}"
        key, value = (part.strip() for part in line.split("=", 1))
        current.setdefault(key, []).append(value)
    return sections


# The keys these units may use, by section (systemd.unit(5), systemd.service(5), systemd.exec(5),
# systemd.kill(5)): a misspelt key is only a warning to systemd, so it is checked here.
KNOWN_KEYS = {
    "Unit": {
        "Description",
        "Documentation",
        "After",
        "Before",
        "Wants",
        "Requires",
        "BindsTo",
        "PartOf",
        "Conflicts",
        "StartLimitIntervalSec",
        "StartLimitBurst",
        "StartLimitAction",
        "ConditionPathExists",
        "AssertPathExists",
    },
    "Service": {
        "Type",
        "User",
        "Group",
        "WorkingDirectory",
        "Environment",
        "EnvironmentFile",
        "ExecStartPre",
        "ExecStart",
        "ExecStartPost",
        "ExecReload",
        "ExecStop",
        "Restart",
        "RestartSec",
        "RestartPreventExitStatus",
        "SuccessExitStatus",
        "TimeoutStartSec",
        "TimeoutStopSec",
        "KillSignal",
        "KillMode",
        "UMask",
        "NoNewPrivileges",
        "PrivateTmp",
        "ProtectSystem",
        "ProtectHome",
        "ReadWritePaths",
        "ReadOnlyPaths",
        "Nice",
        "IOSchedulingClass",
        "StateDirectory",
        "LimitNOFILE",
    },
    "Install": {"WantedBy", "RequiredBy", "Alias"},
}


@pytest.mark.parametrize("path", UNITS, ids=[p.name for p in UNITS])
def test_the_unit_uses_only_keys_systemd_knows(path):
    unit = _unit(path)
    assert set(unit) == {"Unit", "Service", "Install"}
    for section, keys in unit.items():
        unknown = set(keys) - KNOWN_KEYS[section]
        assert not unknown, f"{path.name} [{section}]: {sorted(unknown)}"


@pytest.mark.parametrize("path", UNITS, ids=[p.name for p in UNITS])
def test_the_unit_never_restarts_forever(path):
    service = _unit(path)["Service"]
    assert service["Restart"] == ["always"]
    assert str(EX_CONFIG) in service["RestartPreventExitStatus"][0].split()
    assert service["EnvironmentFile"] == ["/etc/skillscope/env"]
    unit = _unit(path)["Unit"]
    assert int(unit["StartLimitBurst"][0]) <= 10
    assert service["User"] == ["skillscope"]


def _exec(path: Path, key: str) -> list[str]:
    [line] = _unit(path)["Service"][key]
    return shlex.split(line)


def test_the_web_unit_gives_daphne_options_it_accepts():
    from daphne.cli import CommandLineInterface

    argv = _exec(DEPLOY / "systemd" / "skillscope-web@.service", "ExecStart")
    assert argv[0] == f"{INSTALL_ROOT}/.venv/bin/daphne"
    args = CommandLineInterface().parser.parse_args([a.replace("%i", "8001") for a in argv[1:]])
    assert (args.host, args.port, args.proxy_headers) == ("127.0.0.1", 8001, True)
    assert args.application == "webapp.asgi:application"
    # daphne's default, 5 s, reset 263 of 300 websockets opened at once on two processes of a
    # busy 2-core machine, and every one of the 300 × 4 + 4 bench (bench/RESULTS.md).
    assert args.websocket_connect_timeout >= 30


def test_the_web_unit_waits_for_healthz_on_its_own_port():
    argv = _exec(DEPLOY / "systemd" / "skillscope-web@.service", "ExecStartPost")
    script = Path(argv[1].replace(INSTALL_ROOT, str(ROOT)))
    assert script.is_file()
    assert argv[2] == "http://127.0.0.1:%i/healthz"


def test_the_worker_unit_listens_on_the_run_channel():
    from skills_app.runs.supervisor import RUN_CHANNEL

    argv = _exec(DEPLOY / "systemd" / "skillscope-worker@.service", "ExecStart")
    assert argv[1:] == ["manage.py", "runworker", RUN_CHANNEL]


@pytest.mark.skipif(
    shutil.which("systemd-analyze") is None,
    reason="systemd-analyze is not installed; the key list above checked the units instead",
)
def test_systemd_analyze_verifies_the_units(tmp_path):
    # Executables must exist for `verify`: point the units at this checkout instead of /srv, and
    # at the virtual environment running the tests (scripts/test-newest.sh uses .venv-newest).
    instances = []
    for path, instance in zip(UNITS, ("8001", "1"), strict=True):
        text = path.read_text().replace(f"{INSTALL_ROOT}/.venv/", f"{sys.prefix}/")
        (tmp_path / path.name).write_text(text.replace(INSTALL_ROOT, str(ROOT)))
        instances.append(str(tmp_path / path.name.replace("@.", f"@{instance}.")))
    result = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", "--generators=no", *instances],
        capture_output=True,
        text=True,
        timeout=60,
    )
    # verify exits 0 even on unknown keys and bad values; it only warns on stderr.
    assert result.returncode == 0 and result.stderr == "", result.stderr


# -- nginx ------------------------------------------------------------------------------------


@pytest.mark.skipif(
    shutil.which("nginx") is None, reason="nginx is not installed (apt-get install nginx)"
)
@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")
def test_nginx_accepts_the_site(tmp_path):
    cert, key = nginx.self_signed(tmp_path)
    site = NGINX_SITE.read_text()
    live = "/etc/letsencrypt/live/skills.example.com"
    assert f"{live}/fullchain.pem" in site and f"{live}/privkey.pem" in site
    site = site.replace(f"{live}/fullchain.pem", str(cert)).replace(f"{live}/privkey.pem", str(key))
    configuration = nginx.configure(tmp_path, site)
    result = subprocess.run(
        ["nginx", "-t", "-p", str(tmp_path), "-c", str(configuration)]
        + ["-e", str(tmp_path / "error.log")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "[warn]" not in result.stderr and "[emerg]" not in result.stderr, result.stderr


def test_the_upstream_names_the_ports_the_guide_starts():
    ports = set(re.findall(r"server 127\.0\.0\.1:(\d+)", NGINX_SITE.read_text()))
    # The set-up step's line, not the later "a third web process" example.
    [line] = [
        line
        for line in GUIDE.read_text().splitlines()
        if line.startswith("systemctl enable --now skillscope-web@")
    ]
    started = set(re.findall(r"skillscope-web@(\d+)", line))
    assert ports and ports == started


# -- the scripts and the guide ------------------------------------------------------------------


class _Healthy(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/healthz" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def _wait_http(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(DEPLOY / "wait-http.py"), *args],
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_wait_http_returns_once_the_url_answers():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Healthy)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        assert _wait_http(f"http://127.0.0.1:{port}/healthz", "5").returncode == 0
        wrong = _wait_http(f"http://127.0.0.1:{port}/nothing", "0.5")
        assert wrong.returncode == 1 and "HTTP 404" in wrong.stderr
    finally:
        server.shutdown()
        server.server_close()


def test_wait_http_gives_up_when_nothing_answers():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = _wait_http(f"http://127.0.0.1:{port}/healthz", "0.5")
    assert result.returncode == 1 and "did not answer 200 in time" in result.stderr


@pytest.mark.parametrize("script", ["skillscope-manage", "skillscope-backup", "skillscope-restore"])
def test_the_shell_scripts_parse(script):
    subprocess.run(["sh", "-n", str(DEPLOY / script)], check=True, timeout=30)


def test_every_deploy_file_is_installed_by_the_guide_and_every_one_it_names_exists():
    guide = GUIDE.read_text()
    named = set(re.findall(r"(?<![\w/])deploy/[\w./@-]+[\w@]", guide))
    files = {str(p.relative_to(ROOT)) for p in DEPLOY.rglob("*") if p.is_file()}
    assert named - files == set(), "the guide names files that do not exist"
    assert files - named == set(), "deploy/ has files the guide does not install"


def test_the_guide_has_no_stub_and_its_capacity_figures_say_where_and_when():
    guide = GUIDE.read_text()
    assert re.findall(r"(?i)\b(TODO|TBD|stub)\b", guide) == []
    capacity = guide.split("## Capacity (measured)", 1)[1].split("\n## ", 1)[0]
    assert re.search(r"\b20\d\d-\d\d-\d\d\b", capacity), "no date"
    assert "vCPU" in capacity and "load average" in capacity, "no machine"
    assert capacity.count("\n| ") >= 4, "no table of measurements"
    assert "bench/bench_workers.py" in capacity


# -- issue 27: probes kept inside, read-only static files, the backup units ----------------------


def _tls_server(site: str) -> str:
    return site[site.index("listen 443") :]


def test_the_public_site_answers_the_probes_with_404_and_passes_nothing_else_of_them():
    site = _tls_server(NGINX_SITE.read_text())
    for probe in ("healthz", "readyz"):
        found = re.search(rf"location = /{probe} \{{\s*return 404;\s*\}}", site)
        assert found, f"/{probe} is not kept off the public site"
    # An exact-match location wins over every prefix location (nginx's rule), so "location /"
    # cannot pass them on; no regex location could either.
    assert "location ~" not in site


@pytest.mark.parametrize("path", UNITS, ids=[p.name for p in UNITS])
def test_the_service_can_read_but_never_change_the_static_files(path):
    service = _unit(path)["Service"]
    static_root = envfile.load(ENV_FILE)["STATIC_ROOT"]
    mounts = [v.lstrip("-") for v in service["ReadOnlyPaths"]]
    assert any(static_root.startswith(m.rstrip("/") + "/") for m in mounts), mounts
    assert static_root not in " ".join(service.get("ReadWritePaths", []))
    guide = GUIDE.read_text()
    assert (
        "install -d -o root -g root -m 0755 /var/www/skillscope /var/www/skillscope/static" in guide
    )
    assert "SKILLSCOPE_MANAGE_USER=root skillscope-manage collectstatic" in guide


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is missing")
def test_systemd_analyze_verifies_the_backup_service_and_timer(tmp_path):
    for name in ("skillscope-backup.service", "skillscope-backup.timer"):
        text = (DEPLOY / "systemd" / name).read_text()
        text = text.replace("/usr/local/bin/skillscope-backup", str(DEPLOY / "skillscope-backup"))
        (tmp_path / name).write_text(text.replace(INSTALL_ROOT, str(ROOT)))
    result = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", "--generators=no"]
        + [str(tmp_path / "skillscope-backup.service"), str(tmp_path / "skillscope-backup.timer")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0 and result.stderr == "", result.stderr


@pytest.mark.skipif(
    shutil.which("nginx") is None or shutil.which("openssl") is None,
    reason="nginx and openssl are needed (apt-get install nginx)",
)
def test_through_nginx_the_probes_are_404_however_spelled_and_the_site_is_served(tmp_path):
    """The site as installed, running: a stranger gets 404 for the probes, pages pass through."""
    import ssl
    import urllib.request

    seen: list[str] = []

    class Upstream(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            seen.append(self.path)
            body = b"from skillscope"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    upstream = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    ports = [upstream.server_port, upstream.server_port]
    try:
        with nginx.running_nginx(tmp_path / "nginx", ports, tmp_path / "static") as front:

            def status(path: str) -> int:
                request = urllib.request.Request(
                    f"https://127.0.0.1:{front.https_port}{path}",
                    headers={"Host": "skills.example.com"},
                )
                try:
                    with urllib.request.urlopen(request, timeout=5, context=context) as response:
                        return int(response.status)
                except urllib.error.HTTPError as exc:
                    return int(exc.code)

            assert status("/c/1/") == 200 and seen == ["/c/1/"]  # pages reach the processes
            for spelled in ("/healthz", "/readyz", "/readyz?full=1", "/ready%7a", "//healthz"):
                assert status(spelled) == 404, spelled
            assert seen == ["/c/1/"], "a probe reached the upstream"
    finally:
        upstream.shutdown()
        upstream.server_close()
