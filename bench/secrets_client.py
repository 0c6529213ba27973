"""What reading the model key costs a cold start: the Secrets Manager client made in a boto3 session of its own
(Powertools' default ``get_secret`` provider) against one made in the session the function's DynamoDB resource
was already made in (``chuixiang.stores.secrets``).

Each figure is the CPU time (``process_time``) of creating the client, in a fresh interpreter that has imported
boto3 and made the DynamoDB resource first, as a recipe or image function's init does, ``RUNS`` times; the
median is printed. Nothing is sent: a client is created, not used (its first call costs the same either way).

    .venv/bin/python bench/secrets_client.py
"""

from __future__ import annotations

from fresh_interpreters import median_ms

RUNS = 15
SETUP = """
import time
import boto3
boto3.resource("dynamodb", endpoint_url="http://127.0.0.1:9")  # the init's table, made first
t = time.process_time()
"""
OWN_SESSION = (
    SETUP
    + """
boto3.session.Session().client("secretsmanager", endpoint_url="http://127.0.0.1:9")
print((time.process_time() - t) * 1000)
"""
)
SHARED_SESSION = (
    SETUP
    + """
boto3.client("secretsmanager", endpoint_url="http://127.0.0.1:9")
print((time.process_time() - t) * 1000)
"""
)
ENV = {
    "PATH": "/usr/bin:/bin",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "x",
    "AWS_SECRET_ACCESS_KEY": "y",
}


def main() -> None:
    own, shared = median_ms(OWN_SESSION, ENV, RUNS), median_ms(SHARED_SESSION, ENV, RUNS)
    print(f"Secrets Manager client at a cold start, CPU, median of {RUNS} fresh interpreters:")
    print(f"  in a session of its own (Powertools' default provider)   {own:6.1f} ms")
    print(f"  in the session the DynamoDB resource was made in          {shared:6.1f} ms")
    print(f"  saved per cold start                                      {own - shared:6.1f} ms")


if __name__ == "__main__":
    main()
