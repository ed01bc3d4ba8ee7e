"""Fill bundled/libs with the server for the .vsix to carry (`npm run bundle-python`).

A wheel of fabric-ls is built from this checkout and installed with the pinned dependencies of
requirements-bundled.txt into bundled/libs: pure-Python wheels for Python 3.9, so that one .vsix runs
on every platform and every Python from 3.9 on. The extension starts `<python> -m fabric_ls` with that
folder on PYTHONPATH. Runs with any Python 3.9+ that has pip (python3 by default).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CLIENT = Path(__file__).resolve().parents[1]
REPO = CLIENT.parent
REQUIREMENTS = CLIENT / "requirements-bundled.txt"
BUNDLED_LIBS = CLIENT / "bundled" / "libs"
# The oldest Python the bundle must run on; pip then only takes wheels (and releases) that support it.
OLDEST_PYTHON = "3.9"
BINARY_SUFFIXES = (".so", ".pyd", ".dylib", ".dll")


def pip(*args: str) -> None:
    quiet = {**os.environ, "PIP_ROOT_USER_ACTION": "ignore"}
    subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args], env=quiet, check=True)


def build_wheel(wheel_dir: Path) -> Path:
    """Build fabric-ls from the checkout into `wheel_dir` and return the wheel."""
    pip("wheel", "--quiet", "--no-deps", "--wheel-dir", str(wheel_dir), str(REPO))
    wheels = sorted(wheel_dir.glob("fabric_ls-*.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"expected one fabric-ls wheel in {wheel_dir}, found {wheels}")
    return wheels[0]


def install(wheel: Path, target: Path) -> None:
    """Install the wheel and the pinned dependencies, as pure-Python wheels for Python 3.9, into `target`."""
    pip(
        "install",
        "--quiet",
        "--target",
        str(target),
        "--no-deps",
        "--no-compile",
        "--only-binary=:all:",
        "--platform",
        "any",
        "--implementation",
        "py",
        "--abi",
        "none",
        "--python-version",
        OLDEST_PYTHON,
        "--requirement",
        str(REQUIREMENTS),
        str(wheel),
    )
    # Console scripts point at the building Python; the extension runs `-m fabric_ls` instead.
    shutil.rmtree(target / "bin", ignore_errors=True)


def check(target: Path) -> None:
    """Fail on compiled modules, and unless the server imports from `target` alone (no site-packages)."""
    compiled = [path for path in target.rglob("*") if path.suffix in BINARY_SUFFIXES]
    if compiled:
        raise SystemExit(f"the bundle must be pure Python, but holds {compiled}")
    with tempfile.TemporaryDirectory() as outside:
        subprocess.run(
            [sys.executable, "-S", "-c", "import fabric_ls.server, fabric_ls.cli"],
            env={**os.environ, "PYTHONPATH": str(target)},
            cwd=outside,
            check=True,
        )


def folder_size(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", type=Path, default=BUNDLED_LIBS, help=f"default: {BUNDLED_LIBS}")
    target: Path = parser.parse_args().target.resolve()
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as wheel_dir:
        wheel = build_wheel(Path(wheel_dir))
        install(wheel, target)
    check(target)
    packages = sorted(path.name for path in target.glob("*.dist-info"))
    print(f"bundled {len(packages)} distributions, {folder_size(target) / 1e6:.1f} MB, into {target}:")
    print("  " + ", ".join(name.removesuffix(".dist-info") for name in packages))


if __name__ == "__main__":
    main()
