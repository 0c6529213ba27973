"""One process that has loaded what every worker zygote (or every ``chuixiang`` command) loads first, forking one
for each process that asks.

A worker zygote spends ~0.35 s of CPU importing boto3, Powertools, pydantic and httpx and loading boto3's service
models before it imports the layer; a test run starts ~150 of them (a local cloud has one, ``serve`` two), which
is ~50 s of CPU spent on the same imports. A root (``ZygoteRoot``, started once by whoever starts many clouds:
the pipeline tests) has loaded them; a pool whose process sees its socket in ``CHUIXIANG_ZYGOTE_ROOT`` asks it for
a zygote (:func:`fork_zygote`) and gets a fork that goes on as a fresh zygote would: the pool's environment,
session, stdin and output, then the layer imported with that environment.

A fork is a fresh zygote only where what the loading read is the same: the variables the imports read
(:data:`~chuixiang_local.workers.zygote.IMPORT_ENV`), the interpreter's own (``PYTHON*``), the interpreter, the
directory and the niceness. Where one differs the root refuses, and the pool starts a zygote of its own as it
does without a root. The root reaps what it forks and tells each pool its zygote's exit status.

A root of kind ``command`` does the same for ``chuixiang`` commands (:mod:`chuixiang_local.commands.preload`): the
tests start ``serve`` and the other commands through one (:func:`fork_command`; a caller that is not Python through
:mod:`chuixiang_local.commands.launch`), each fork running the CLI as ``python -m`` would. A command whose asker is
gone (its connection closed before the command ended) is killed, as a fresh one would have ended with its starter.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import socket
import subprocess  # nosec B404  # starts the root with fixed arguments
import sys
import tempfile
import threading
import traceback
import weakref
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from chuixiang_local.workers import zygote

#: Names the sockets of the roots the processes started meanwhile ask, in turn (``os.pathsep`` between two: roots
#: loaded with other settings, say one unbuffered); unset, each pool starts its own zygote.
ROOT_VARIABLE = "CHUIXIANG_ZYGOTE_ROOT"
#: Names the socket of a root of kind ``command`` (unset: :func:`fork_command` has none to ask).
COMMAND_ROOT_VARIABLE = "CHUIXIANG_COMMAND_ROOT"
#: How long a pool waits for the root's answer: a root asked while it loads answers once it has loaded.
ROOT_ANSWER_S = 60.0
_MESSAGE_BYTES = 1 << 20


class RootRefused(Exception):
    """A root (``CHUIXIANG_ZYGOTE_ROOT``'s, ``CHUIXIANG_COMMAND_ROOT``'s) did not fork a fresh zygote or command:
    the reason says why."""


@dataclass(frozen=True)
class Kind:
    """What a root loads, the variables that loading reads, and what each fork becomes (given the request)."""

    import_env: Collection[str]
    preload: Callable[[], None]
    become: Callable[[dict[str, Any]], None]


def _become_zygote(request: dict[str, Any]) -> None:
    zygote.take_nice()
    zygote.become_zygote()


def _become_command(request: dict[str, Any]) -> None:
    from chuixiang_local.commands.preload import become_command

    become_command(request["argv"])


def kind_of(name: str) -> Kind:
    """``zygote`` or ``command``; a command root's code is imported only by those that fork or ask for commands
    (a zygote forked from a root has no module a fresh one lacks but the root's own)."""
    if name == "command":
        from chuixiang_local.commands import preload as command

        return Kind(command.IMPORT_ENV, command.preload, _become_command)
    if name == "zygote":
        return Kind(zygote.IMPORT_ENV, zygote.preload, _become_zygote)
    raise ValueError(f"no root of kind {name!r}")


def loading_settings(env: Mapping[str, str], kind: str = "zygote") -> dict[str, Any]:
    """What a fork's loading depends on besides its code, for a fork of ``env`` asked for by this process."""
    compared = kind_of(kind).import_env
    return {
        "kind": kind,
        "executable": sys.executable,
        "cwd": os.path.realpath(os.getcwd()),
        "nice": os.getpriority(os.PRIO_PROCESS, 0),
        "env": {k: v for k, v in env.items() if k in compared or k.startswith(("PYTHON", "_PYTHON"))},
    }


class ForkedZygote:
    """A process the root forked, held as a ``subprocess.Popen`` is (``pid``, ``stdin``, ``poll``, ``wait``,
    ``send_signal``, ``terminate``, ``kill``, ``returncode``): not this process's child, so its exit is seen on a
    pidfd and its status is the root's word. Safe from several threads at once, as ``Popen`` is (a pool's
    threads poll its zygote while another closes it): the pidfd lives as long as this object, so no descriptor
    it polls or signals is ever another's, and one thread reads the status."""

    def __init__(self, pid: int, pidfd: int, root: socket.socket, stdin: IO[bytes] | None) -> None:
        self.pid, self.stdin = pid, stdin
        self.returncode: int | None = None
        self._pidfd, self._root = pidfd, root
        self._ending = threading.Lock()
        weakref.finalize(self, os.close, pidfd)

    def poll(self) -> int | None:
        if self.returncode is None and _readable(self._pidfd, 0):
            self._ended()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not _readable(self._pidfd, timeout):
                raise subprocess.TimeoutExpired(f"zygote {self.pid}", timeout or 0)
            self._ended()
        assert self.returncode is not None  # nosec B101  # set by _ended
        return self.returncode

    def send_signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):  # a pidfd names its process: never a pid used again
            signal.pidfd_send_signal(self._pidfd, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _ended(self) -> None:
        """The status the root sends once it has reaped the process (-1 if the root is gone), read once."""
        with self._ending:
            if self.returncode is not None:
                return
            self._root.settimeout(10)
            try:
                message = self._root.recv(_MESSAGE_BYTES)
            except OSError:
                message = b""
            self.returncode = int(json.loads(message)["returncode"]) if message else -1
            self._root.close()


def _readable(fd: int, timeout: float | None) -> bool:
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        return bool(selector.select(timeout))


def fork_zygote(env: dict[str, str], out: int, *, new_session: bool) -> ForkedZygote | None:
    """A zygote of ``env`` (output to ``out``) forked by the first root that can give a fresh one, or None when
    there is none to ask; raises ``RootRefused`` when none can (saying why each cannot)."""
    paths = [p for p in os.environ.get(ROOT_VARIABLE, "").split(os.pathsep) if p]
    if not paths:
        return None
    read_end, write_end = os.pipe()
    request = {"env": env, "new_session": new_session, "settings": loading_settings(env)}
    refusals = []
    try:
        for path in paths:
            try:
                forked = _ask(path, request, [read_end, out, out])
            except RootRefused as refused:
                refusals.append(str(refused))
                continue
            forked.stdin = os.fdopen(write_end, "wb")
            return forked
    finally:
        os.close(read_end)
    os.close(write_end)
    raise RootRefused("; ".join(refusals))


def fork_command(argv: Sequence[str], env: dict[str, str], fds: Sequence[int], cwd: str) -> ForkedZygote | None:
    """``python -m chuixiang_local.commands.cli *argv`` in ``cwd`` forked by the command root, with ``env`` and
    ``fds`` (its stdin, stdout and stderr), or None when there is none to ask; raises ``RootRefused`` when the
    root cannot give one that is a fresh command (one started elsewhere than ``cwd``, say)."""
    path = os.environ.get(COMMAND_ROOT_VARIABLE)
    if not path:
        return None
    settings = {**loading_settings(env, "command"), "cwd": os.path.realpath(cwd)}
    request = {"env": env, "argv": list(argv), "new_session": False, "settings": settings}
    return _ask(path, request, list(fds))


def _ask(path: str, request: dict[str, Any], fds: list[int]) -> ForkedZygote:
    """Send the request and the fds (they stay the caller's); the fork, or ``RootRefused`` saying why not."""
    root = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    root.settimeout(ROOT_ANSWER_S)
    try:
        root.connect(path)
        socket.send_fds(root, [json.dumps(request).encode()], fds)
        message, pidfds, _, _ = socket.recv_fds(root, _MESSAGE_BYTES, 1)
    except OSError as exc:
        root.close()
        raise RootRefused(f"the root at {path} did not answer: {exc}") from exc
    answer = json.loads(message) if message else {"refused": "the root closed the connection"}
    if "pid" not in answer or not pidfds:
        root.close()
        raise RootRefused(answer.get("refused", "no fork"))
    return ForkedZygote(int(answer["pid"]), pidfds[0], root, None)


@dataclass
class _Forked:
    pid: int
    pidfd: int
    pool: socket.socket


@dataclass
class _Root:
    """The root's loop: a fork per request, a status per exit, until its starter closes its stdin."""

    listener: socket.socket
    settings: dict[str, Any]
    become: Callable[[dict[str, Any]], None]
    #: What the forks inherit, loaded at the first request: a root nobody asks (a test process whose tests start
    #: no serve) costs nothing, and the first asker waits for it as a fresh process would have loaded it.
    load: Callable[[], None] | None = None
    selector: selectors.BaseSelector = field(default_factory=selectors.DefaultSelector)
    forked: dict[int, _Forked] = field(default_factory=dict)  # by pidfd
    #: A command's asker, by its connection: a command whose asker is gone (killed, say) is ended, as the fresh one
    #: the asker would have started ends with it. A zygote's pool ends its zygote itself (its stdin).
    askers: dict[int, _Forked] = field(default_factory=dict)

    def serve(self) -> None:
        self.selector.register(self.listener, selectors.EVENT_READ)
        self.selector.register(0, selectors.EVENT_READ)
        while True:
            for key, _ in self.selector.select():
                if key.fd == 0:
                    if not os.read(0, 4096):
                        return  # its starter closed or died: later pools start their own
                elif key.fileobj is self.listener:
                    if self.load is not None:
                        self.load()
                        self.load = None
                    self._answer(self.listener.accept()[0])
                elif key.fd in self.askers:
                    self._asker_gone(self.askers.pop(key.fd))
                elif key.fd in self.forked:  # not a key this round's reaping unregistered already
                    self._reap(self.forked.pop(key.fd))

    def _answer(self, pool: socket.socket) -> None:
        pool.settimeout(10)
        try:
            message, fds, _, _ = socket.recv_fds(pool, _MESSAGE_BYTES, 3)
        except OSError:
            pool.close()
            return
        try:
            request = json.loads(message or b"{}")
        except ValueError:  # not a pool's request: refused like any other, the root lives on
            request = {}
        refused = self._refusal(request, fds)
        if refused:
            with contextlib.suppress(OSError):
                pool.send(json.dumps({"refused": refused}).encode())
            for fd in fds:
                os.close(fd)
            pool.close()
            return
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            self._become(request, fds, pool)
        for fd in fds:
            os.close(fd)
        pidfd = os.pidfd_open(pid)  # unreaped until its pidfd says it exited: the pid is its own till then
        with contextlib.suppress(OSError):
            socket.send_fds(pool, [json.dumps({"pid": pid}).encode()], [pidfd])
        self.forked[pidfd] = forked = _Forked(pid, pidfd, pool)
        self.selector.register(pidfd, selectors.EVENT_READ)
        if self.settings["kind"] == "command":
            self.askers[pool.fileno()] = forked
            self.selector.register(pool, selectors.EVENT_READ)

    def _asker_gone(self, forked: _Forked) -> None:
        """The asker's end of the connection is readable: it closed (nothing else is sent on it). SIGKILL, as the
        asker's own end came."""
        self.selector.unregister(forked.pool)
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(forked.pidfd, signal.SIGKILL)

    def _refusal(self, request: dict[str, Any], fds: list[int]) -> str | None:
        if len(fds) != 3 or "settings" not in request:
            return "a request is its settings and three file descriptors (stdin, stdout, stderr)"
        differ = sorted(
            {k for k in ("kind", "executable", "cwd", "nice") if request["settings"].get(k) != self.settings[k]}
            | {
                k
                for k in {*request["settings"]["env"], *self.settings["env"]}
                if request["settings"]["env"].get(k) != self.settings["env"].get(k)
            }
        )
        return f"loaded with another {', '.join(differ)}" if differ else None

    def _reap(self, forked: _Forked) -> None:
        self.selector.unregister(forked.pidfd)
        if self.askers.pop(forked.pool.fileno(), None) is not None:
            self.selector.unregister(forked.pool)
        _, status = os.waitpid(forked.pid, 0)
        with contextlib.suppress(OSError):
            forked.pool.send(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}).encode())
        forked.pool.close()
        os.close(forked.pidfd)

    def _become(self, request: dict[str, Any], fds: list[int], pool: socket.socket) -> None:
        """In the fork: nothing of the root's left open, the pool's stdin and output, then a fresh zygote's life."""
        code = 1
        try:
            self.selector.close()
            self.listener.close()
            pool.close()
            for forked in self.forked.values():
                forked.pool.close()
                os.close(forked.pidfd)
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
                os.close(fd)
            if request["new_session"]:
                os.setsid()
            os.environ.clear()
            os.environ.update(request["env"])
            self.become(request)
            code = 0
        except SystemExit as exc:  # as the interpreter ends on one: its code, or its message and 1
            code = _exit_code(exc)
        except BaseException:  # said on the pool's output, as a zygote of its own would
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None or isinstance(exc.code, int):
        return exc.code or 0
    print(exc.code, file=sys.stderr)
    return 1


class ZygoteRoot:
    """``with ZygoteRoot(env) as root``: a root loaded with ``env`` (the variables its zygotes' pools pass them)
    and this process's directory; processes that find ``root.path`` in ``CHUIXIANG_ZYGOTE_ROOT`` use it. It ends
    with the block (or with this process): the zygotes it forked live on until their pools close them.
    ``kind="command"``: a root of ``chuixiang`` commands, found in ``CHUIXIANG_COMMAND_ROOT``."""

    def __init__(self, env: dict[str, str], kind: str = "zygote", cwd: str | None = None) -> None:
        """``cwd``: where it is loaded, and where its forks run (this process's directory by default)."""
        self._env, self._kind, self._cwd = env, kind, cwd
        self._dir = tempfile.mkdtemp(prefix="cx-zygote-root-")
        self.path = os.path.join(self._dir, "root.sock")

    def __enter__(self) -> ZygoteRoot:
        self._proc = subprocess.Popen(  # nosec B603  # sys.executable and our own module
            [sys.executable, "-m", "chuixiang_local.workers.zygote_root", self.path, self._kind],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=self._env,
            cwd=self._cwd,
        )
        assert self._proc.stdout is not None  # nosec B101  # type narrowing (stdout=PIPE)
        if not self._proc.stdout.readline():  # bound: a pool that asks from now on waits while it loads
            self._proc.wait()
            raise RuntimeError(f"the zygote root exited ({self._proc.returncode}) before it listened")
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._proc.stdin is not None  # nosec B101  # type narrowing (stdin=PIPE)
        self._proc.stdin.close()
        self._proc.wait(30)
        with contextlib.suppress(OSError):
            os.unlink(self.path)
            os.rmdir(self._dir)


def main() -> None:
    # Ctrl-C reaches the whole foreground group: the root's starter ends it (and it does not end its zygotes).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    path, kind = sys.argv[1], kind_of(sys.argv[2])
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(128)
    print("listening", flush=True)
    _Root(listener, loading_settings(os.environ, sys.argv[2]), kind.become, load=kind.preload).serve()


if __name__ == "__main__":
    main()
