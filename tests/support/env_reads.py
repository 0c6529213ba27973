"""Every environment variable an import reads, by name: recorded in a fresh interpreter (an ``os.environ`` that
notes each key asked for), so a root that forks what it loaded can be held to compare them all."""

from __future__ import annotations

import json
import subprocess  # nosec B404  # this interpreter, on the script below
import sys
from typing import Any

_RECORD = """
import importlib, json, os, sys
read = set()
class Recorded(os._Environ):
    def __getitem__(self, key): read.add(key); return super().__getitem__(key)
    def __contains__(self, key): read.add(key); return super().__contains__(key)
    def get(self, key, default=None): read.add(key); return super().get(key, default)
env = os.environ
os.environ = Recorded(env._data, env.encodekey, env.decodekey, env.encodevalue, env.decodevalue)
importlib.import_module(sys.argv[1]).preload()
loaded = sorted(read)
report = {}
exec(sys.argv[2], {"report": report})
print(json.dumps({"read": loaded, **report}))
"""


def fresh_preload(module: str, after: str = "") -> dict[str, Any]:
    """``module.preload()`` run in a fresh interpreter: what it read of the environment (``read``), and what
    ``after``, run there next, put in its ``report`` dict. One loading serves both (each is seconds of CPU)."""
    out = subprocess.run(  # nosec B603  # this interpreter, our own script
        [sys.executable, "-c", _RECORD, module, after], capture_output=True, text=True, check=True, timeout=120
    )
    found: dict[str, Any] = json.loads(out.stdout)
    return found


def variables_read_by_preload(module: str) -> set[str]:
    """What ``module.preload()`` reads of the environment, run in a fresh interpreter."""
    return set(fresh_preload(module)["read"])
