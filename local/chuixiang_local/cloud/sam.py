"""``template.yaml`` after SAM's transform, as CloudFormation receives it on a deploy.

The local cloud takes from it what SAM decides and a hand-written reading would guess: each function's and
the state machine's role with every policy template expanded (what the IAM gate enforces), and the
``AWS::Lambda::Version`` logical ids (a new id is a version SAM would publish). The translator is the one
aws-sam-cli pins (the Makefile's ``SAM_TRANSLATOR_VERSION``), installed in ``.venv-sam``; it runs there as a subprocess
(:mod:`chuixiang_local.sam_transform`), ~1-4 s, so its answer is cached by everything it depends on.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess  # nosec B404  # runs SAM's pinned translator with a fixed argv
from pathlib import Path
from typing import Any

from stack_template import REPO_ROOT, ConfigError, load_cfn, nested_paths

SAM_PYTHON = REPO_ROOT / ".venv-sam" / "bin" / "python"
SCRIPT = Path(__file__).resolve().parents[1] / "sam_transform.py"
_SKIPPED = {"__pycache__", ".pytest_cache", ".mypy_cache"}
_MEMO: dict[str, dict[str, Any]] = {}


def content_digest(directory: Path) -> str:
    """What ``sam package`` names an artifact by: a digest of its files (paths and bytes), so that any change
    to a function's code or the layer gives a new S3 key, which SAM hashes into the version's logical id."""
    digest = hashlib.md5(usedforsecurity=False)
    files = sorted(
        p for p in directory.rglob("*") if p.is_file() and not _SKIPPED & set(p.parts) and p.suffix != ".pyc"
    )
    for path in files:
        digest.update(str(path.relative_to(directory)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def artifact_digests(doc: dict[str, Any], root: Path, code_dirs: dict[str, Path] | None = None) -> dict[str, str]:
    """``{CodeUri or ContentUri: digest}`` of every local artifact; ``code_dirs`` (logical id -> directory)
    stands for a release whose code is elsewhere than the template says."""
    out: dict[str, str] = {}
    for lid, resource in doc["Resources"].items():
        props = resource.get("Properties", {})
        for key in ("CodeUri", "ContentUri"):
            uri = props.get(key)
            if isinstance(uri, str) and not uri.startswith("s3://"):
                directory = (code_dirs or {}).get(lid, root / uri)
                out[uri] = content_digest(directory)
    return out


def transformed(
    template_path: Path,
    doc: dict[str, Any],
    *,
    params: dict[str, str] | None = None,
    region: str = "us-east-1",
    code_dirs: dict[str, Path] | None = None,
) -> dict[str, Any]:
    """The whole transformed template (``Resources``, ``Conditions``…) for these parameters and this code, with
    the nested observability's resources read in (``sam_transform``)."""
    request = {
        "template": str(template_path),
        "region": region,
        "params": params or {},
        "content": artifact_digests(doc, template_path.parent, code_dirs),
    }
    text = template_path.read_text()
    raw = load_cfn(text)
    nested = b"".join(p.read_bytes() for p in nested_paths(raw, template_path.parent))
    key = hashlib.sha256(
        json.dumps(request, sort_keys=True).encode() + text.encode() + nested + SCRIPT.read_bytes()
    ).hexdigest()
    if key in _MEMO:
        return _MEMO[key]
    cache = REPO_ROOT / ".chuixiang" / "sam-transform" / f"{key}.json"
    cache.parent.mkdir(parents=True, exist_ok=True)
    # One process transforms, the others wait for its answer: a fresh clone's test processes all asked for the
    # same few transforms at once and each ran its own (~1-4 s of CPU apiece).
    with open(cache.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not cache.exists():
            tmp = cache.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(_run_translator(request)))
            tmp.replace(cache)  # atomic: a reader without the lock (an older process) sees all or nothing
    _MEMO[key] = json.loads(cache.read_text())
    return _MEMO[key]


def _run_translator(request: dict[str, Any]) -> dict[str, Any]:
    if not SAM_PYTHON.exists():
        raise ConfigError(
            f"SAM's translator is not installed ({SAM_PYTHON} is missing): run `make run` or "
            "`make test` once, which install its venv"
        )
    done = subprocess.run(
        [str(SAM_PYTHON), str(SCRIPT)],
        input=json.dumps(request),  # nosec B603  # fixed argv
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise ConfigError(f"SAM's transform failed: {done.stderr.strip()[-2000:]}")
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def version_ids(resources: dict[str, Any]) -> dict[str, str]:
    """``{function logical id: its AWS::Lambda::Version logical id}``: when SAM's id changes, a deploy
    publishes a new version (the id carries a hash of what SAM decided is the version's content)."""
    out = {}
    for lid, resource in resources.items():
        if resource["Type"] == "AWS::Lambda::Version":
            function = resource["Properties"]["FunctionName"]["Ref"]
            out[function] = lid
    return out
