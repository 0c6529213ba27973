"""The shared layer as Lambda gets it: size, and each handler's cold import under python3.12.

    make bench-layer        # or: PYENV_VERSION=…:3.12.1 .venv/bin/python bench/layer_cold_start.py [--runs 5]

Builds the layer with ``layers/shared/build_layer.py`` (this machine's platform, the
same recipe ``sam build`` runs for arm64) into a temporary directory, and a stand-in
for the runtime's ``/var/runtime`` (boto3 and its stack, precompiled). Prints the
layer's files, MB and zipped MB, then, for each function, the median time to import
its handler module in a fresh ``python3.12 -I`` process whose ``sys.path`` is the
function's code, the layer and the runtime - with ``PYTHONDONTWRITEBYTECODE`` set,
since ``/opt`` is read-only. Variants, each built the same way:

* ``shipped``      - the layer as ``build_layer.py`` makes it (precompiled, no boto3 stack);
* ``sources only`` - what SAM's python builder ships: ``pip install -r requirements.txt``
  and the package, sources without ``.pyc`` (its botocore shadows the runtime's).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess  # nosec B404  # runs python3.12 with fixed arguments
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "local"), str(ROOT / "layers" / "shared")]

from stack_template import Template  # noqa: E402

from chuixiang_local.cloud.local_cloud import FAKE_CREDENTIALS  # noqa: E402 - moto's documented dummies
from chuixiang_local.workers.invoker import lambda_env  # noqa: E402 - the local runner's Lambda environment

PROBE = """
import importlib, json, sys, time
t = time.perf_counter()
importlib.import_module("app")
print(json.dumps({"ms": (time.perf_counter() - t) * 1000,
                  "botocore": sys.modules["botocore"].__file__}))
"""


def layer_size(site: Path) -> tuple[int, float, float]:
    files = [p for p in site.rglob("*") if p.is_file()]
    raw = sum(p.stat().st_size for p in files)
    with tempfile.TemporaryFile() as buffer:
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
            for p in files:
                zf.write(p, p.relative_to(site.parent))
        zipped = buffer.tell()
    return len(files), raw / 1e6, zipped / 1e6


def import_ms(python: str, code_dir: Path, paths: list[Path], env: dict[str, str]) -> dict:
    # -B, not PYTHONDONTWRITEBYTECODE: -I ignores PYTHON* variables, and a written cache would hide the compile.
    out = subprocess.run(
        [
            python,
            "-I",
            "-B",
            "-c",  # nosec B603
            f"import sys; sys.path[:0] = {[str(code_dir), *map(str, paths)]!r}\n" + PROBE,
        ],
        env=env,
        cwd=code_dir,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--python", default="python3.12")
    args = ap.parse_args()
    # The interpreter itself (a pyenv shim needs PYENV_VERSION, which the function's environment lacks).
    args.python = subprocess.run(
        [args.python, "-c", "import sys; print(sys.executable)"],  # nosec B603
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    work = Path(tempfile.mkdtemp(prefix="cx-layer-"))
    try:
        subprocess.run([args.python, str(ROOT / "layers/shared/build_layer.py"), str(work / "layer")], check=True)  # nosec B603
        site = work / "layer" / "python"
        runtime = work / "runtime"
        subprocess.run(
            [
                args.python,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",  # nosec B603
                "--target",
                str(runtime),
                "boto3",
            ],
            check=True,
        )
        subprocess.run([args.python, "-m", "compileall", "-q", str(runtime)], check=True)  # nosec B603
        sources = work / "sources" / "python"
        subprocess.run(
            [
                args.python,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",  # nosec B603
                "--no-compile",
                "--target",
                str(sources),
                "-r",
                str(ROOT / "layers/shared/requirements.txt"),
            ],
            check=True,
        )
        shutil.copytree(
            ROOT / "layers/shared/chuixiang",
            sources / "chuixiang",
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        )
        dist = sorted(p.name.split("-")[0] for p in site.glob("*.dist-info"))
        for label, root in (("shipped", site), ("sources only", sources)):
            files, mb, zipped = layer_size(root)
            print(f"layer {label:<12}: {files:5d} files, {mb:5.1f} MB, {zipped:4.1f} MB zipped")
        print(f"shipped distributions: {', '.join(dist)}")
        template = Template()
        variants = {"shipped": [site, runtime], "sources only": [sources, runtime]}
        print(f"cold import of each handler, median of {args.runs} fresh python3.12 processes (ms):")
        print(f"  {'function':<10}" + "".join(f"{v:>15}" for v in variants))
        for spec in template.functions().values():
            env = lambda_env(spec, FAKE_CREDENTIALS)
            env.pop("PYENV_VERSION", None)
            row = []
            for name, paths in variants.items():
                runs = [import_ms(args.python, spec.code_dir, paths, env) for _ in range(args.runs)]
                if name == "shipped":  # nosec B101  # the runtime's botocore, not a copy in the layer
                    assert str(runtime) in runs[0]["botocore"], runs[0]["botocore"]
                row.append(statistics.median(r["ms"] for r in runs))
            print(f"  {spec.code_dir.name:<10}" + "".join(f"{ms:>15.0f}" for ms in row))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
