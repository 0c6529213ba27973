"""A command the tests' command root forks is the command a user starts: the same output and exit code (a
success, a refused ladder, a usage error), Ctrl-C ends it as it ends a fresh one, its random ids are its own, and
a caller whose loading would differ is refused and starts the command itself. Real processes, as the pipeline
tier runs them (``tests/pipeline/conftest.py`` starts the root)."""

from __future__ import annotations

import os
import subprocess  # nosec B404  # the CLI as a user starts it, to compare
import sys
import threading
from typing import Any

import pytest

from chuixiang_local.commands.preload import CLI, IMPORT_ENV
from chuixiang_local.workers.zygote_root import RootRefused, fork_command

from ..support.commands import forked_cli, run_cli
from ..support.env_reads import fresh_preload
from ..support.serve import ROOT

#: Run in a fresh interpreter once it has loaded, as a root loads (not in a test process: what its collector froze,
#: ``gc.get_objects`` does not list): is moto's id generator among those reseeded, and does reseeding change it.
RESEEDED = """
from chuixiang_local.commands.preload import GENERATORS, reseed
from moto.moto_api._internal import mock_random
report["moto_generator_listed"] = any(g is mock_random for g in GENERATORS)
state = mock_random.getstate()
reseed()
report["reseeding_changed_it"] = mock_random.getstate() != state
"""


@pytest.fixture(scope="module")
def loaded() -> dict[str, Any]:
    """One fresh loading of the command root's modules (~3.5 s of CPU) for the two tests that read one: what it read
    of the environment, then what reseeding did."""
    return fresh_preload("chuixiang_local.commands.preload", after=RESEEDED)


def _fresh(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # nosec B603  # this interpreter, our own module
        [sys.executable, "-m", CLI, *args], capture_output=True, text=True, cwd=ROOT, timeout=120
    )


def _forked(*args: str, interrupt_when: str | None = None) -> subprocess.CompletedProcess[str]:
    done = forked_cli(*args, env=os.environ, interrupt_when=interrupt_when)
    assert done is not None, "no command root: tests/pipeline/conftest.py starts one"
    return done


def test_the_loading_reads_only_what_the_root_compares(loaded: dict[str, Any]) -> None:
    """A fork is a fresh command only if the root compares every variable its loading reads: an import that reads
    one more (moto upgraded) fails here until it is in ``IMPORT_ENV``."""
    read = set(loaded["read"])
    assert {"HOME", "TEST_SERVER_MODE"} <= read  # the recording sees moto's reads
    compared = {k for k in read if k.startswith(("PYTHON", "_PYTHON"))} | set(IMPORT_ENV)
    assert read <= compared, sorted(read - compared)


@pytest.mark.parametrize(
    "args",
    [
        ("ladder",),
        ("ladder", "--parameter-overrides", "RecipeTotalTimeoutMs=150000"),  # refused: exit 2
        ("cook",),  # no dish: argparse's usage and exit 2
        ("cook", "x", "--parameter-overrides", "NoSuchParameter=1"),  # a configuration error
    ],
)
def test_a_forked_command_answers_as_a_fresh_one(args: tuple[str, ...]) -> None:
    forked, fresh = _forked(*args), _fresh(*args)
    assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)


def test_ctrl_c_ends_a_forked_cook_as_a_fresh_one_ends() -> None:
    """The root ignores SIGINT (Ctrl-C is its starter's); the command it forks takes it as a fresh one does:
    ``main`` turns the KeyboardInterrupt into exit 130, nothing else said."""
    forked = _forked("cook", "番茄炒蛋", "--fake-pace-ms", "500", interrupt_when="local cloud up")
    assert forked.returncode == 130 and "Traceback" not in forked.stderr, forked.stderr


def test_each_fork_seeds_the_generators_the_loading_made(loaded: dict[str, Any]) -> None:
    assert loaded["moto_generator_listed"] and loaded["reseeding_changed_it"], loaded


def test_a_caller_whose_loading_would_differ_is_refused_and_starts_it_itself(
    capsys: pytest.CaptureFixture[str],
) -> None:
    other = {**os.environ, "LC_ALL": "C"}
    with pytest.raises(RootRefused, match="loaded with another LC_ALL"):
        fork_command(["ladder"], other, [0, 1, 2], str(ROOT))
    with pytest.raises(RootRefused, match="loaded with another cwd"):
        fork_command(["ladder"], dict(os.environ), [0, 1, 2], str(ROOT / "docs"))
    done = run_cli("ladder", env=other)
    assert done.returncode == 0 and "ladder OK" in done.stdout
    assert "chuixiang ladder not forked: loaded with another LC_ALL" in capsys.readouterr().err


def test_threads_that_poll_and_wait_at_once_all_see_one_exit_status() -> None:
    """As a pool's threads do with its zygote: one reads the root's word, every other sees what it read (two that
    read it at once once failed on the socket the first had closed)."""
    with open(os.devnull, "r+b") as null:
        forked = fork_command(["ladder"], dict(os.environ), [null.fileno()] * 3, str(ROOT))
        assert forked is not None
        seen: list[int | None] = []

        def poll_until_ended() -> None:
            while (code := forked.poll()) is None:
                pass
            seen.append(code)

        threads = [threading.Thread(target=poll_until_ended) for _ in range(6)]
        threads += [threading.Thread(target=lambda: seen.append(forked.wait(60))) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    assert seen == [0] * 8
