"""nginx running the guide's site (deploy/nginx/skillscope.conf) in front of the tests' web processes.

The site file is used as the guide installs it; only what names this machine is replaced: the
listening ports (free ones on loopback), the certificate (a self-signed one made here), the
upstream's two `server` lines (the web processes' ports) and the static files' folder. The main
configuration around it is what Debian's nginx.conf gives a site: mime.types, temp folders.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.multiprocess.conftest import START_TIMEOUT, free_port, wait_for_port

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "deploy" / "nginx" / "skillscope.conf"
LIVE = "/etc/letsencrypt/live/skills.example.com"
STATIC = "/var/www/skillscope/static/"
UPSTREAMS = ("server 127.0.0.1:8001 ", "server 127.0.0.1:8002 ")


def installed() -> bool:
    return shutil.which("nginx") is not None and shutil.which("openssl") is not None


@dataclass
class Nginx:
    https_port: int
    http_port: int
    base: Path

    def log(self) -> str:
        path = self.base / "error.log"
        return path.read_text(errors="replace") if path.exists() else ""


def self_signed(base: Path) -> tuple[Path, Path]:
    """A certificate for skills.example.com, valid for a day: (certificate, key)."""
    cert, key = base / "cert.pem", base / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]
        + ["-nodes", "-days", "1", "-subj", "/CN=skills.example.com"]
        + ["-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


def site(
    https_port: int, http_port: int, upstreams: list[int], static_root: Path, base: Path
) -> str:
    """The guide's site with this machine's ports, certificate and static folder."""
    text = SITE.read_text()
    cert, key = self_signed(base)
    replaced = {
        f"{LIVE}/fullchain.pem": str(cert),
        f"{LIVE}/privkey.pem": str(key),
        "listen [::]:80;": "",
        "listen [::]:443 ssl;": "",
        "listen 80;": f"listen 127.0.0.1:{http_port};",
        "listen 443 ssl;": f"listen 127.0.0.1:{https_port} ssl;",
        f"alias {STATIC};": f"alias {static_root}/;",
    }
    assert len(upstreams) == len(UPSTREAMS), "the guide's site has two web processes"
    replaced.update(
        {line: f"server 127.0.0.1:{port} " for line, port in zip(UPSTREAMS, upstreams, strict=True)}
    )
    for old, new in replaced.items():
        assert old in text, f"the guide's site no longer has {old!r}"
        text = text.replace(old, new)
    return text


def configure(base: Path, site_text: str) -> Path:
    """nginx.conf in `base` around the site, as Debian's main configuration includes a site;
    its path."""
    (base / "site.conf").write_text(site_text)
    temp = " ".join(
        f"{kind}_temp_path {base / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    # As root, nginx's workers would otherwise run as nobody, who cannot read pytest's folders.
    user = "user root;\n" if os.geteuid() == 0 else ""
    configuration = base / "nginx.conf"
    configuration.write_text(
        f"{user}pid {base / 'nginx.pid'};\nerror_log {base / 'error.log'};\ndaemon off;\n"
        "events {}\n"
        f"http {{\n  include /etc/nginx/mime.types;\n  default_type application/octet-stream;\n"
        f"  access_log {base / 'access.log'};\n  {temp}\n"
        f"  include {base / 'site.conf'};\n}}\n"
    )
    return configuration


@contextlib.contextmanager
def running_nginx(
    base: Path, upstreams: list[int], static_root: Path, *, https_port: int = 0
) -> Iterator[Nginx]:
    """nginx serving the guide's site on loopback (HTTPS on `https_port`, or a free port), stopped
    at the end."""
    base.mkdir(parents=True, exist_ok=True)
    front = Nginx(https_port=https_port or free_port(), http_port=free_port(), base=base)
    configuration = configure(
        base, site(front.https_port, front.http_port, upstreams, static_root, base)
    )
    process = subprocess.Popen(
        ["nginx", "-p", str(base), "-c", str(configuration), "-e", str(base / "error.log")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for_port(front.https_port, START_TIMEOUT, process=process)
        yield front
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
