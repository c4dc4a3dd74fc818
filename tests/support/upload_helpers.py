"""Building uploads in tests: zips (with raw control over entries), folders, storage snapshots."""

from __future__ import annotations

import io
import stat
import struct
import textwrap
import zipfile
from pathlib import Path

from skills_app.models import SkillPackage, SkillVersion
from skills_app.registry.uploads import storage_root


def skill_md(name: str, description: str = "Does a small thing well.", body: str = "Body.") -> str:
    return textwrap.dedent(
        f"""\
        ---
        name: {name}
        description: {description}
        ---
        {body}
        """
    )


def make_zip(files: dict[str, bytes | str], *, compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    """A zip holding exactly these entries (names are written as given)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as zf:
        for name, data in files.items():
            zf.writestr(name, data.encode() if isinstance(data, str) else data)
    return buf.getvalue()


def zip_with_entry(
    info: zipfile.ZipInfo, data: bytes, extra: dict[str, str] | None = None
) -> bytes:
    """A zip with one hand-made entry (mode bits, flags) next to ordinary ones."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, text in (extra or {}).items():
            zf.writestr(name, text)
        zf.writestr(info, data)
    return buf.getvalue()


def special_entry(name: str, kind: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = (kind | 0o777) << 16
    return info


def symlink_entry(name: str) -> zipfile.ZipInfo:
    return special_entry(name, stat.S_IFLNK)


def snapshot() -> tuple[list[str], int, int]:
    """Everything under the storage root, plus the package and version row counts."""
    root = storage_root()
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []
    return files, SkillPackage.objects.count(), SkillVersion.objects.count()


def write_folder(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)
    return root


def patch_headers(
    data: bytes, name: str, *, local: int, central: int, value: int, fmt: str
) -> bytes:
    """Overwrite one field of `name`'s local header and central directory entry (raw zip bytes)."""
    out = bytearray(data)
    raw = name.encode()
    for sig, offset, name_at in ((b"PK\x03\x04", local, 30), (b"PK\x01\x02", central, 46)):
        pos = out.find(sig)
        while pos != -1:
            if out[pos + name_at : pos + name_at + len(raw)] == raw:
                struct.pack_into(fmt, out, pos + offset, value)
            pos = out.find(sig, pos + 4)
    return bytes(out)
