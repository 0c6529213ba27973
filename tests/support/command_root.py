"""A command forked by the tests' command root, or None, said on stderr, where the root would not give a fresh one
(the caller then starts it as a user does)."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from chuixiang_local.workers.zygote_root import ForkedZygote, RootRefused, fork_command


def fork_or_say(args: Sequence[str], env: Mapping[str, str], fds: Sequence[int], cwd: Path) -> ForkedZygote | None:
    """``chuixiang *args`` with ``env`` and ``fds`` (stdin, stdout, stderr) in ``cwd``, forked; None without a root
    or when it refuses (why, on this process's stderr)."""
    try:
        return fork_command(args, dict(env), fds, str(cwd))
    except RootRefused as refused:
        print(f"chuixiang {args[0]} not forked: {refused}", file=sys.stderr)
        return None
