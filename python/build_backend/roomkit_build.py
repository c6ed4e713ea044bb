"""A PEP 517 build backend for the roomkit package, standard library only: it writes
the pure-Python wheel (and sdist, and an editable wheel) that `pip install ./python`
needs without fetching a build tool from a package index. The package version comes
from roomkit/version.py, the one place it is written."""
import base64
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile
from typing import Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "roomkit"
TAG = "py3-none-any"


def _project() -> Dict[str, str]:
    """The [project] strings of pyproject.toml that the metadata needs."""
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    section = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, re.MULTILINE | re.DOTALL)
    fields = dict(re.findall(r'^([A-Za-z-]+)\s*=\s*"([^"]*)"\s*$', section.group(1) if section else "", re.MULTILINE))
    with open(os.path.join(ROOT, PACKAGE, "version.py"), encoding="utf-8") as f:
        match = re.search(r'^__version__\s*=\s*"([^"]+)"', f.read(), re.MULTILINE)
    if match is None:
        raise RuntimeError("roomkit/version.py has no __version__")
    fields["version"] = match.group(1)
    return fields


def _metadata() -> str:
    p = _project()
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {p['name']}",
        f"Version: {p['version']}",
        f"Summary: {p.get('description', '')}",
        "License: Apache-2.0",
        f"Requires-Python: {p.get('requires-python', '>=3.9')}",
        "Classifier: Programming Language :: Python :: 3",
        "Classifier: Typing :: Typed",
        "Description-Content-Type: text/markdown",
    ]
    return "\n".join(lines) + "\n\n" + readme


def _package_files() -> List[Tuple[str, str]]:
    """(path in the archive, path on disk) of every file of the package."""
    files = []
    for directory, dirs, names in os.walk(os.path.join(ROOT, PACKAGE)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(names):
            if name.endswith((".pyc", ".pyo")):
                continue
            disk = os.path.join(directory, name)
            files.append((os.path.relpath(disk, ROOT).replace(os.sep, "/"), disk))
    return files


def _wheel_name() -> str:
    return f"{PACKAGE}-{_project()['version']}-{TAG}.whl"


def _write_wheel(wheel_directory: str, contents: List[Tuple[str, bytes]]) -> str:
    version = _project()["version"]
    dist_info = f"{PACKAGE}-{version}.dist-info"
    contents = contents + [
        (f"{dist_info}/METADATA", _metadata().encode("utf-8")),
        (f"{dist_info}/WHEEL", f"Wheel-Version: 1.0\nGenerator: roomkit_build\nRoot-Is-Purelib: true\nTag: {TAG}\n".encode()),
        (f"{dist_info}/top_level.txt", f"{PACKAGE}\n".encode()),
    ]
    record = []
    for name, data in contents:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{dist_info}/RECORD,,")
    contents.append((f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode()))
    filename = _wheel_name()
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, data in contents:
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(info, data)
    return filename


def _read(disk: str) -> bytes:
    with open(disk, "rb") as f:
        return f.read()


def get_requires_for_build_wheel(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[dict] = None) -> List[str]:
    return []


def build_wheel(wheel_directory: str, config_settings: Optional[dict] = None, metadata_directory: Optional[str] = None) -> str:
    return _write_wheel(wheel_directory, [(name, _read(disk)) for name, disk in _package_files()])


def build_editable(wheel_directory: str, config_settings: Optional[dict] = None, metadata_directory: Optional[str] = None) -> str:
    # A .pth file puts this directory on sys.path, so edits to the source take effect at once.
    return _write_wheel(wheel_directory, [(f"_{PACKAGE}_editable.pth", (ROOT + "\n").encode())])


def build_sdist(sdist_directory: str, config_settings: Optional[dict] = None) -> str:
    version = _project()["version"]
    base = f"{PACKAGE}-{version}"
    filename = f"{base}.tar.gz"
    members = [(name, _read(disk)) for name, disk in _package_files()]
    for extra in ("pyproject.toml", "README.md", "build_backend/roomkit_build.py"):
        members.append((extra, _read(os.path.join(ROOT, extra))))
    members.append(("PKG-INFO", _metadata().encode("utf-8")))
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(f"{base}/{name}")
            info.size = len(data)
            info.mtime = int(time.time())
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return filename
