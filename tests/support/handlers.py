"""A function's handler module loaded in this process, as the Lambda runtime imports ``app.py`` (each function's
module is named ``app``: loaded from its file under a name of its own, so two functions never share one)."""

from __future__ import annotations

import importlib.util
from types import ModuleType

from stack_template import REPO_ROOT


def function_module(code_dir: str) -> ModuleType:
    """``functions/<code_dir>/app.py``, freshly imported (its init runs again)."""
    spec = importlib.util.spec_from_file_location(f"{code_dir}_app", REPO_ROOT / "functions" / code_dir / "app.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
