"""Build the shared layer: dependencies without what the runtime ships, every module precompiled.

    python3.12 build_layer.py OUT_DIR [--platform manylinux2014_aarch64]

``sam build`` runs this through ``Makefile`` (``BuildMethod: makefile``) for arm64;
``bench/layer_cold_start.py`` and ``tests/pipeline/test_layer_build.py`` run it for this
machine. Why not SAM's own python builder:

* **No ``.pyc``.** It ships sources only, and ``/opt`` is read-only on Lambda, so
  every cold start compiles the whole layer again (the recipe handler imported in
  ~0.8 s instead of ~0.4 s). Here every module is compiled by the interpreter that
  will run it: our ``chuixiang`` keeps its sources, with *unchecked-hash* pycs in
  ``__pycache__`` (valid whatever the files' timestamps become in the zip, never
  rewritten); the pinned third-party packages ship as sourceless ``.pyc`` only,
  which halves them (tracebacks keep file and line; the source is the pinned version).
* **Dead weight.** Swagger UI's bundle, pydantic's v1 copy and Powertools
  utilities nothing here imports (:data:`PRUNE`).
* **The same bytes every build.** Pycs hold no timestamp and no build path (:data:`REPRODUCIBLE`,
  :data:`MOUNTED_AT`), so an unchanged tree gives the layer SAM has already published.
* **botocore twice.** ``aws-xray-sdk`` (Powertools' Tracer) depends on botocore, so
  the layer carried 30 of its 41 MB in boto3's stack, shadowing the copy in the
  runtime. The python3.12 runtime ships boto3, botocore, s3transfer, urllib3,
  python-dateutil and six: they are removed here and the runtime's are used.
"""

from __future__ import annotations

import argparse
import compileall
import py_compile
import shutil
import subprocess  # nosec B404  # runs pip with fixed arguments
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: Distributions the Lambda python3.12 runtime provides (in /var/runtime); never shipped in the layer.
RUNTIME_PROVIDED = ("boto3", "botocore", "s3transfer", "urllib3", "python_dateutil", "six")
#: Dead weight in what we install, removed: files nothing in the functions imports or serves.
PRUNE = (
    "aws_lambda_powertools/event_handler/openapi/swagger_ui/swagger-ui-bundle.min.js",  # 1.5 MB: the deployed
    "aws_lambda_powertools/event_handler/openapi/swagger_ui/swagger-ui.min.css",  # API serves no Swagger UI
    "pydantic/v1",  # pydantic's copy of its 1.x API (1 MB); nothing here uses it
    # Powertools utilities this app does not use (each a separate feature, imported only by its user)
    "aws_lambda_powertools/utilities/auth_alpha",
    "aws_lambda_powertools/utilities/batch",
    "aws_lambda_powertools/utilities/data_masking",
    "aws_lambda_powertools/utilities/feature_flags",
    "aws_lambda_powertools/utilities/kafka",
    "aws_lambda_powertools/utilities/streaming",
    "aws_lambda_powertools/utilities/validation",
    "wrapt-stubs",  # type stubs
)
#: The runtime this layer is for (``CompatibleRuntimes`` in template.yaml).
PYTHON_VERSION = "3.12"
#: Where Lambda mounts a layer's ``python`` folder: the file name compiled into every code object.
MOUNTED_AT = "/opt/python"
#: Hash-based pycs, unchecked: no timestamp in them, and the same bytes from the same source on every build
#: (with ``MOUNTED_AT`` for the path, the layer is byte-identical across builds and build folders: SAM's checksum
#: of it does not change, and a deploy of an unchanged tree republishes nothing).
REPRODUCIBLE = py_compile.PycInvalidationMode.UNCHECKED_HASH


def install(site: Path, platform: str | None) -> None:
    target = (
        ["--platform", platform, "--implementation", "cp", "--python-version", PYTHON_VERSION, "--only-binary=:all:"]
        if platform
        else []
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",  # nosec B603
            "--no-compile",
            "--target",
            str(site),
            *target,
            "-r",
            str(HERE / "requirements.txt"),
        ],
        check=True,
    )


def remove_distribution(site: Path, name: str) -> None:
    """Remove an installed distribution: every file its RECORD lists, then its metadata."""
    for info in site.glob(f"{name}-*.dist-info"):
        for line in (info / "RECORD").read_text().splitlines():
            path = site / line.split(",", 1)[0]
            if path.is_file() and site in path.resolve().parents:
                path.unlink()
        shutil.rmtree(info)
    for leftover in sorted(site.iterdir()):  # packages emptied by the RECORD pass (only __pycache__ left)
        if leftover.is_dir() and not any(p.is_file() for p in leftover.rglob("*") if "__pycache__" not in p.parts):
            shutil.rmtree(leftover)


def compile_sourceless(site: Path) -> None:
    """Third-party modules become ``module.pyc`` in place of ``module.py``: imported without a source
    to check, half the bytes of source plus cache. A traceback through them keeps file and line (the path
    where Lambda mounts the layer, never this build's)."""
    for source in sorted(site.rglob("*.py")):
        py_compile.compile(
            str(source),
            cfile=str(source.with_suffix(".pyc")),
            dfile=f"{MOUNTED_AT}/{source.relative_to(site).as_posix()}",
            doraise=True,
            invalidation_mode=REPRODUCIBLE,
        )
        source.unlink()
    for cache in [p for p in site.rglob("__pycache__") if p.is_dir()]:
        shutil.rmtree(cache)


def build(out: Path, platform: str | None) -> Path:
    site = out / "python"
    if site.exists():
        shutil.rmtree(site)
    install(site, platform)
    for name in RUNTIME_PROVIDED:
        remove_distribution(site, name)
    shutil.rmtree(site / "bin", ignore_errors=True)  # console scripts: nothing runs them on Lambda
    for relative in PRUNE:
        path = site / relative
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    for stub in site.rglob("*.pyi"):
        stub.unlink()
    compile_sourceless(site)
    own = site / "chuixiang"
    shutil.copytree(HERE / "chuixiang", own, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    if not compileall.compile_dir(own, quiet=1, ddir=f"{MOUNTED_AT}/chuixiang", invalidation_mode=REPRODUCIBLE):
        raise SystemExit("compileall failed for chuixiang")
    return site


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path, help="the layer's root (SAM's ARTIFACTS_DIR); modules go to OUT/python")
    ap.add_argument("--platform", help="pip platform tag of the target, e.g. manylinux2014_aarch64 (default: this one)")
    args = ap.parse_args()
    if args.platform and f"{sys.version_info.major}.{sys.version_info.minor}" != PYTHON_VERSION:
        raise SystemExit(f"run with python{PYTHON_VERSION}: the .pyc files must match the runtime's interpreter")
    build(args.out, args.platform)


if __name__ == "__main__":
    main()
