"""Stable error codes and the user-facing messages that go with them.

The mini-program switches on ``code``; ``message`` is what a user reads, so it
is a short Chinese sentence that says what to do. The catalogue is the single
source of messages: the state machine stores only codes (plus an internal
``detail``, clipped by :func:`clip_detail`), and the job document is rendered
from this table.
"""

from __future__ import annotations

from enum import StrEnum

from .redaction import redact


class ErrorCode(StrEnum):
    INVALID_DISH = "INVALID_DISH"
    RECIPE_TIMEOUT = "RECIPE_TIMEOUT"
    RECIPE_UPSTREAM_ERROR = "RECIPE_UPSTREAM_ERROR"
    RECIPE_INVALID = "RECIPE_INVALID"
    RECIPE_EMPTY = "RECIPE_EMPTY"
    JOB_TIMED_OUT = "JOB_TIMED_OUT"
    #: An operator stopped its execution (StopExecution): ABORTED, reconciled.
    JOB_STOPPED = "JOB_STOPPED"
    INTERNAL = "INTERNAL"
    IMAGE_TIMEOUT = "IMAGE_TIMEOUT"
    IMAGE_UPSTREAM_ERROR = "IMAGE_UPSTREAM_ERROR"
    IMAGE_INVALID = "IMAGE_INVALID"
    #: The image stage itself failed (a crash, not the image model): the recipe is served without a picture.
    IMAGE_INTERNAL = "IMAGE_INTERNAL"


#: code -> (message, retryable by default)
CATALOGUE: dict[ErrorCode, tuple[str, bool]] = {
    ErrorCode.INVALID_DISH: ("菜名需要是 1 到 40 个字，不能含控制字符，换个写法再试。", False),
    ErrorCode.RECIPE_TIMEOUT: ("搭配师走神了，再试一次。", True),
    ErrorCode.RECIPE_UPSTREAM_ERROR: ("菜谱服务暂时不可用，请稍后再试。", True),
    ErrorCode.RECIPE_INVALID: ("这次写出的菜谱不完整，再试一次。", True),
    ErrorCode.RECIPE_EMPTY: ("模型这次没有写出菜谱内容，再试一次。", True),
    ErrorCode.JOB_TIMED_OUT: ("这道菜做得太久，已经停下了，再试一次。", True),
    ErrorCode.JOB_STOPPED: ("这道菜被临时停下了，请再试一次。", True),
    ErrorCode.INTERNAL: ("系统出了点问题，请稍后再试。", True),
    ErrorCode.IMAGE_TIMEOUT: ("成品图画得太慢，先把菜谱给你。", True),
    ErrorCode.IMAGE_UPSTREAM_ERROR: ("成品图服务暂时不可用，先把菜谱给你。", True),
    ErrorCode.IMAGE_INVALID: ("成品图没有画好，先把菜谱给你。", True),
    ErrorCode.IMAGE_INTERNAL: ("成品图这次出了点问题，先把菜谱给你。", True),
}


class HttpErrorCode(StrEnum):
    """Codes of a refused HTTP request (never stored on a job)."""

    BAD_REQUEST = "BAD_REQUEST"
    NOT_FOUND = "NOT_FOUND"
    JOB_NOT_FOUND = "JOB_NOT_FOUND"
    METHOD_NOT_ALLOWED = "METHOD_NOT_ALLOWED"
    UNSUPPORTED_MEDIA_TYPE = "UNSUPPORTED_MEDIA_TYPE"
    #: A POST body far larger than any dish request (refused before it is parsed).
    PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"
    INVALID_IDEMPOTENCY_KEY = "INVALID_IDEMPOTENCY_KEY"
    IDEMPOTENCY_KEY_REUSED = "IDEMPOTENCY_KEY_REUSED"
    REQUEST_IN_PROGRESS = "REQUEST_IN_PROGRESS"
    TOO_MANY_JOBS = "TOO_MANY_JOBS"
    UNAUTHORIZED = "UNAUTHORIZED"
    #: The server takes no new jobs for now (a local ``serve`` draining on SIGTERM); retry after ``Retry-After``.
    SERVICE_UNAVAILABLE = "SERVICE_UNAVAILABLE"


HTTP_MESSAGES: dict[HttpErrorCode, str] = {
    HttpErrorCode.BAD_REQUEST: "请求格式不对。",
    HttpErrorCode.NOT_FOUND: "没有这个接口。",
    HttpErrorCode.JOB_NOT_FOUND: "没有找到这个任务。",
    HttpErrorCode.METHOD_NOT_ALLOWED: "这个接口不支持这种请求方式。",
    HttpErrorCode.UNSUPPORTED_MEDIA_TYPE: "请用 JSON 提交（Content-Type: application/json）。",
    HttpErrorCode.PAYLOAD_TOO_LARGE: "请求太大了：只需要提交菜名。",
    HttpErrorCode.INVALID_IDEMPOTENCY_KEY: "Idempotency-Key 需要是 1 到 128 个可见 ASCII 字符。",
    HttpErrorCode.IDEMPOTENCY_KEY_REUSED: "这个 Idempotency-Key 已经用于另一道菜，请换一个新的。",
    HttpErrorCode.REQUEST_IN_PROGRESS: "上一次提交还在处理中，请稍后再查。",
    HttpErrorCode.TOO_MANY_JOBS: "现在做菜的人太多了，请稍后再试。",
    HttpErrorCode.UNAUTHORIZED: "请先登录。",
    HttpErrorCode.SERVICE_UNAVAILABLE: "服务正在更新，请稍后再试。",
}


def message_for(code: str) -> str:
    if code in HttpErrorCode.__members__:
        return HTTP_MESSAGES[HttpErrorCode(code)]
    try:
        return CATALOGUE[ErrorCode(code)][0]
    except ValueError:
        return CATALOGUE[ErrorCode.INTERNAL][0]


def retryable_default(code: str) -> bool:
    try:
        return CATALOGUE[ErrorCode(code)][1]
    except ValueError:
        return True


#: Longest internal ``detail`` stored in a job item or a state's output.
MAX_DETAIL_CHARS = 500


def clip_detail(detail: str) -> str:
    """What may be stored of an internal detail: credentials redacted, clipped."""
    return redact(detail)[:MAX_DETAIL_CHARS]


class StageError(Exception):
    """A classified failure of a stage: carries the stable code and an internal detail.

    ``detail`` is for logs and the job item, never shown to users. ``retryable``
    tells the *client* whether trying the same dish again may help.
    """

    def __init__(self, code: ErrorCode, detail: str, *, retryable: bool | None = None, abandoned: bool = False) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail
        self.retryable = retryable_default(code) if retryable is None else retryable
        #: The stage gave up because the job had moved on (an operator's stop, its timeout, the reconciler):
        #: not the stage's failure, and not counted as one (the job's end is counted as what ended it).
        self.abandoned = abandoned
