"""The local cloud as a target for SAM's own local tools (``sam local invoke``, ``sam local start-api``).

``chuixiang cloud`` keeps the local cloud up on a fixed port and writes two files:

* the **env-vars file** ``sam local invoke --env-vars`` reads: a JSON object keyed by each function's
  logical id, string values, giving every variable the template declares for that function the value
  it has in the local cloud (the deployed table, bucket and state machine names, the model's URL, the
  secret holding its key), with ``AWS_ENDPOINT_URL`` pointing at the local cloud from inside a
  container. SAM only sets variables the template declares, which is why ``template.yaml`` declares
  ``AWS_ENDPOINT_URL`` (empty in AWS);
* ``cloud.json``, where ``chuixiang seed`` finds the running cloud to create the job an event names.

Inside a container, the host is not ``127.0.0.1``: ``host.docker.internal`` on Docker Desktop, or the
host's address on Linux (``--add-host host.docker.internal:host-gateway`` makes the name work there too).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from chuixiang_local.cloud.local_cloud import LocalCloud

DEFAULT_HOST_ADDRESS = "host.docker.internal"


def _from_container(url: str, host_address: str) -> str:
    """``url`` as a container reaches it: a loopback or wildcard host becomes ``host_address``."""
    parts = urlsplit(url)
    if parts.hostname not in ("127.0.0.1", "localhost", "0.0.0.0"):  # nosec B104  # compared, not bound
        return url
    netloc = f"{host_address}:{parts.port}" if parts.port else host_address
    return urlunsplit(parts._replace(netloc=netloc))


def env_vars(cloud: LocalCloud, host_address: str = DEFAULT_HOST_ADDRESS) -> dict[str, dict[str, str]]:
    """Per function (logical id), every variable its template environment declares, as the local cloud has it."""
    out: dict[str, dict[str, str]] = {}
    for logical_id, spec in cloud.functions.items():
        values = {key: str(value) for key, value in spec.env.items()}
        if "AWS_ENDPOINT_URL" in values:
            values["AWS_ENDPOINT_URL"] = _from_container(cloud.endpoint, host_address)
        if "MODEL_BASE_URL" in values:
            values["MODEL_BASE_URL"] = _from_container(values["MODEL_BASE_URL"], host_address)
        out[logical_id] = values
    return out


def write_files(cloud: LocalCloud, env_file: Path, state_file: Path, host_address: str) -> dict[str, dict[str, str]]:
    variables = env_vars(cloud, host_address)
    env_file.parent.mkdir(parents=True, exist_ok=True)
    env_file.write_text(json.dumps(variables, indent=2, ensure_ascii=False) + "\n")
    state: dict[str, Any] = {
        "endpoint": cloud.endpoint,
        "table": cloud.table_name,
        "bucket": cloud.bucket_name,
        "stateMachineArn": cloud.state_machine_arn,
        "envVars": str(env_file),
    }
    state_file.write_text(json.dumps(state, indent=2) + "\n")
    return variables
