"""Child-process side of a local Lambda invocation (``python -m chuixiang_local.lambda_bootstrap``).

Imports the handler the way the Lambda runtime does (function code dir and the
layer on ``sys.path``), gives it a context whose remaining time counts down to
the same instant the parent kills the process, and writes the result - or a
Lambda-shaped ``{errorType, errorMessage}`` - to the file the parent named.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback

from chuixiang_local.context import LocalContext


def main() -> None:
    handler = os.environ["_HANDLER"]
    result_path = os.environ["CHUIXIANG_RESULT_FILE"]
    context = LocalContext(
        function_name=os.environ["AWS_LAMBDA_FUNCTION_NAME"],
        memory_limit_in_mb=int(os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")),
        aws_request_id=os.environ.get("CHUIXIANG_REQUEST_ID", "local"),
        deadline_ms=int(os.environ["CHUIXIANG_DEADLINE_MS"]),
        invoked_function_arn=os.environ.get("CHUIXIANG_FUNCTION_ARN", ""),
    )
    event = json.loads(sys.stdin.buffer.read() or b"{}")
    module_name, _, func_name = handler.rpartition(".")
    try:
        func = getattr(importlib.import_module(module_name), func_name)
        out: object = {"result": func(event, context)}
    except Exception as exc:  # noqa: BLE001 - reported like the Lambda runtime does
        out = {"error": {"errorType": type(exc).__name__, "errorMessage": str(exc),
                         "stackTrace": traceback.format_exception(exc)}}
        traceback.print_exc()
    with open(result_path, "w", encoding="utf-8") as fh:
        json.dump(out, fh, ensure_ascii=False, default=str)
    # Lambda answers as soon as the handler returns; interpreter teardown (hundreds of ms with
    # boto3 loaded) must not count against the function's Timeout.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
