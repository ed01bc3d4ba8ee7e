"""Fill bundled/libs with the server for the .vsix to carry (`npm run bundle-python`).

A wheel of fabric-ls is built from this checkout and installed with the pinned dependencies of
requirements-bundled.txt into bundled/libs: pure-Python wheels for Python 3.9, so that one .vsix runs
on every platform and every Python from 3.9 on. The extension starts `<python> -m fabric_ls` with that
folder on PYTHONPATH. Runs with any Python 3.9+ that has pip (python3 by default).
"""

from __future__ import annotations

import argparse
import email.parser
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
# The oldest Python the bundle must run on: pip takes wheels built for it. An index that does not
# publish Requires-Python lets pip take releases that need a newer Python: check_metadata catches them.
OLDEST_PYTHON = "3.9"
SUPPORTED_PYTHONS = ("3.9", "3.10", "3.11", "3.12", "3.13", "3.14")
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


def metadata_problems(target: Path) -> list[str]:
    """What the distributions in `target` need and do not get there, on any supported Python."""
    try:
        from packaging.requirements import Requirement
        from packaging.specifiers import SpecifierSet
        from packaging.utils import canonicalize_name
    except ImportError:  # pip carries its own copy
        from pip._vendor.packaging.requirements import Requirement  # type: ignore[no-redef]
        from pip._vendor.packaging.specifiers import SpecifierSet  # type: ignore[no-redef]
        from pip._vendor.packaging.utils import canonicalize_name  # type: ignore[no-redef]

    metadata = {}
    for info in target.glob("*.dist-info"):
        parsed = email.parser.Parser().parsestr((info / "METADATA").read_text(encoding="utf-8"))
        metadata[canonicalize_name(parsed["Name"])] = parsed
    problems = set()
    for name, parsed in metadata.items():
        for python in SUPPORTED_PYTHONS:
            requires_python = parsed.get("Requires-Python")
            if requires_python and not SpecifierSet(requires_python).contains(f"{python}.0"):
                problems.add(f"{name} {parsed['Version']} needs Python {requires_python}, not {python}")
            environment = {"python_version": python, "python_full_version": f"{python}.0", "extra": ""}
            for line in parsed.get_all("Requires-Dist") or []:
                requirement = Requirement(line)
                if requirement.marker and not requirement.marker.evaluate(environment):
                    continue
                dependency = metadata.get(canonicalize_name(requirement.name))
                if dependency is None:
                    problems.add(f"{name} needs {requirement} on Python {python}: not bundled")
                elif not requirement.specifier.contains(dependency["Version"], prereleases=True):
                    problems.add(f"{name} needs {requirement}, bundled: {dependency['Version']}")
    return sorted(problems)


def check(target: Path) -> None:
    """Fail on compiled modules, on unmet requirements, and unless the server imports from `target` alone
    (no site-packages)."""
    compiled = [path for path in target.rglob("*") if path.suffix in BINARY_SUFFIXES]
    if compiled:
        raise SystemExit(f"the bundle must be pure Python, but holds {compiled}")
    problems = metadata_problems(target)
    if problems:
        raise SystemExit("requirements-bundled.txt does not fit:\n  " + "\n  ".join(problems))
    with tempfile.TemporaryDirectory() as outside:
        subprocess.run(
            [sys.executable, "-S", "-c", "import fabric_ls.lsp.serve, fabric_ls.cli"],
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
