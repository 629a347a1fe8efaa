"""Where packages live: ``$(find-pkg-share pkg)`` and the executable of ``<node pkg exec>``.

Share directory of a package, first match wins:

1. ``package_path`` folders (``manip-launch --package-path DIR``, or ``MANIP_LAUNCH_PACKAGE_PATH``,
   ``:``-separated): ``DIR/<pkg>/package.xml`` or ``DIR/package.xml`` naming ``<pkg>`` -> that folder.
2. A Python distribution named ``<pkg>`` installed editable (``pip install -e``, PEP 610
   ``direct_url.json`` with ``"editable": true``) whose source folder has a ``package.xml`` naming
   ``<pkg>`` -> the source folder. This is how the project's packages are installed in ``.venv``; it
   behaves like ``colcon build --symlink-install`` (edits are seen at once) PROVIDED the package's
   ``data_files`` install each file at the same relative path under ``share/<pkg>/`` as it has in the
   package folder (e.g. ``('share/manip_sim/config', glob('config/*.yaml'))``).
3. The ament index, exactly like ``ros2 launch``: ``<prefix>/share/<pkg>`` of the first prefix of
   ``AMENT_PREFIX_PATH`` holding ``share/ament_index/resource_index/packages/<pkg>``.

Executable of ``<node pkg="P" exec="E">``, first match wins:

1. Like launch_ros: ``<prefix>/lib/P/E`` (an executable file) where ``<prefix>`` is the ament prefix of P.
2. The console-script entry point named E of the Python distribution P (``importlib.metadata``): the
   script pip wrote for it if there is one, else ``<python> -c <import and call the entry point>``.

No rclpy import here (ament_index_python is used when it is importable, with the same semantics).
"""
from __future__ import annotations

import importlib.metadata as md
import json
import os
import sys
import sysconfig
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Iterable, List, Optional, Sequence
from urllib.parse import unquote, urlparse

PACKAGE_PATH_ENV = 'MANIP_LAUNCH_PACKAGE_PATH'
INDEX_MARKERS = Path('share') / 'ament_index' / 'resource_index' / 'packages'


class PackageNotFoundError(LookupError):
    """A package (or an executable of it) could not be resolved; the message says what was tried."""


def ament_prefixes(env: Optional[dict] = None) -> List[str]:
    """The prefixes of ``AMENT_PREFIX_PATH`` (empty list when unset)."""
    value = (os.environ if env is None else env).get('AMENT_PREFIX_PATH', '')
    return [p for p in value.split(os.pathsep) if p]


def default_ament_prefix_path() -> Optional[str]:
    """``sys.prefix`` when it holds an ament resource index (the PyPI venv), else None."""
    if (Path(sys.prefix) / 'share' / 'ament_index' / 'resource_index').is_dir():
        return sys.prefix
    return None


def package_xml_name(path: Path) -> Optional[str]:
    """``<name>`` of a package.xml, or None when the file is missing or unreadable."""
    try:
        name = ET.parse(path).getroot().findtext('name')
    except (OSError, ET.ParseError):
        return None
    return name.strip() if name else None


def _distribution(name: str) -> Optional[md.Distribution]:
    try:
        return md.distribution(name)
    except md.PackageNotFoundError:
        return None


def editable_source_dir(dist: md.Distribution) -> Optional[Path]:
    """Source folder of a distribution installed with ``pip install -e``, else None."""
    text = dist.read_text('direct_url.json')
    if not text:
        return None
    try:
        info = json.loads(text)
    except ValueError:
        return None
    if not info.get('dir_info', {}).get('editable'):
        return None
    url = urlparse(info.get('url', ''))
    if url.scheme != 'file':
        return None
    return Path(unquote(url.path))


class PackageResolver:
    """Resolves share directories and node executables (see the module docstring for the order).

    ``package_path``: extra source folders searched first. ``python``: interpreter for entry points
    without a script. ``env``: environment whose ``AMENT_PREFIX_PATH`` is used (default os.environ).
    """

    def __init__(self, package_path: Sequence[str] = (), python: str = sys.executable,
                 env: Optional[dict] = None):
        self.package_path = [str(p) for p in package_path]
        self.python = python
        self.env = env

    # ---- share directories ------------------------------------------------------------------
    def _from_package_path(self, pkg: str) -> Optional[Path]:
        for base in self.package_path:
            for cand in (Path(base) / pkg, Path(base)):
                if package_xml_name(cand / 'package.xml') == pkg:
                    return cand.resolve()
        return None

    def _from_editable(self, pkg: str) -> Optional[Path]:
        dist = _distribution(pkg)
        if dist is None:
            return None
        src = editable_source_dir(dist)
        if src is not None and package_xml_name(src / 'package.xml') == pkg:
            return src.resolve()
        return None

    def ament_prefix(self, pkg: str) -> Optional[str]:
        """The first prefix of AMENT_PREFIX_PATH with the ament index marker of ``pkg``."""
        if self.env is None:
            try:
                from ament_index_python.packages import PackageNotFoundError as _NotFound
                from ament_index_python.packages import get_package_prefix
            except ImportError:
                pass
            else:
                if not ament_prefixes():
                    return None
                try:
                    return get_package_prefix(pkg)
                except (_NotFound, ValueError, OSError):
                    return None
        for prefix in ament_prefixes(self.env):
            if (Path(prefix) / INDEX_MARKERS / pkg).is_file():
                return prefix
        return None

    def share_dir(self, pkg: str) -> str:
        """``$(find-pkg-share pkg)``."""
        for found in (self._from_package_path(pkg), self._from_editable(pkg)):
            if found is not None:
                return str(found)
        prefix = self.ament_prefix(pkg)
        if prefix is not None:
            return os.path.join(prefix, 'share', pkg)
        raise PackageNotFoundError(
            f"package '{pkg}' not found: not in the package path {self.package_path or '[]'}, "
            f"no editable Python distribution '{pkg}' with a package.xml, and not in the ament "
            f"index of AMENT_PREFIX_PATH={os.pathsep.join(ament_prefixes(self.env)) or '(unset)'} "
            f"(is the workspace set up / sourced?)")

    # ---- executables --------------------------------------------------------------------------
    def _entry_point_command(self, pkg: str, exe: str) -> Optional[List[str]]:
        dist = _distribution(pkg)
        if dist is None:
            return None
        eps = [ep for ep in dist.entry_points if ep.group == 'console_scripts' and ep.name == exe]
        if not eps:
            return None
        ep = eps[0]
        script = self._console_script(dist, ep)
        if script is not None:
            return [script]
        module, _, attr = ep.value.partition(':')
        module = module.strip()
        attr = attr.split('[')[0].strip()
        call = f'from {module} import {attr.split(".")[0]} as _ep'
        rest = ''.join(f'.{part}' for part in attr.split('.')[1:])
        if attr:
            code = f'import sys; sys.argv[0] = {exe!r}; {call}; sys.exit(_ep{rest}())'
        else:
            code = (f'import runpy, sys; sys.argv[0] = {exe!r}; '
                    f'runpy.run_module({module!r}, run_name="__main__")')
        return [self.python, '-c', code]

    @staticmethod
    def _console_script(dist: md.Distribution, ep: md.EntryPoint) -> Optional[str]:
        """The script pip generated for the entry point (listed in the RECORD and naming it)."""
        for f in dist.files or ():
            if f.name != ep.name or 'bin' not in f.parts:
                continue
            path = Path(f.locate()).resolve()
            try:
                ok = path.is_file() and os.access(path, os.X_OK) and \
                    ep.value.split(':')[0].strip() in path.read_text(errors='replace')
            except OSError:
                ok = False
            if ok:
                return str(path)
        scripts = Path(sysconfig.get_path('scripts')) / ep.name
        try:
            if scripts.is_file() and os.access(scripts, os.X_OK) and \
                    ep.value.split(':')[0].strip() in scripts.read_text(errors='replace'):
                return str(scripts)
        except OSError:
            pass
        return None

    def executable(self, pkg: str, exe: str) -> List[str]:
        """Command (a list) that starts executable ``exe`` of package ``pkg``."""
        tried = []
        prefix = self.ament_prefix(pkg)
        if prefix is not None:
            cand = Path(prefix) / 'lib' / pkg / exe
            if cand.is_file() and os.access(cand, os.X_OK):
                return [str(cand)]
            tried.append(f'{cand} (not an executable file)')
        else:
            tried.append(f'no ament prefix of {pkg} in AMENT_PREFIX_PATH='
                         f'{os.pathsep.join(ament_prefixes(self.env)) or "(unset)"}')
        cmd = self._entry_point_command(pkg, exe)
        if cmd is not None:
            return cmd
        dist = _distribution(pkg)
        tried.append(f"no Python distribution '{pkg}'" if dist is None else
                     f"Python distribution '{pkg}' has no console script '{exe}'")
        raise PackageNotFoundError(f"executable '{exe}' of package '{pkg}' not found: "
                                   + '; '.join(tried))


def split_path_list(values: Iterable[str]) -> List[str]:
    """Flatten ``:``-separated path lists, dropping empty entries."""
    out = []
    for v in values:
        out.extend(p for p in v.split(os.pathsep) if p)
    return out
