"""Local tooling: run the SAM application without Docker or an AWS account.

The runner reads ``template.yaml`` and the real ASL, deploys them into moto
(DynamoDB, S3, Secrets Manager, Step Functions executing the ASL) and runs each
Lambda invocation in its own Python process, killed at the function's Timeout.

Every process that imports the runner (its commands, servers and zygotes, and the test processes)
collects cyclic garbage rarely: it builds a large heap that lives as long as it does (botocore's service
models, moto's backends, the parsed templates), and at CPython's default of a young collection every
700 net allocations the collector walks it again and again. Measured on a local cloud's start and three
jobs: the collector took 0.7 of 2.9 s of CPU; at 50,000 it takes 0.13 of 2.0 s. Reference counting
still frees everything not in a cycle. The Lambda functions' own processes run with CPython's defaults,
as in Lambda (:func:`chuixiang_local.workers.zygote.function_zygote`).
"""

import gc

#: CPython's thresholds, as a Lambda function's process has them.
LAMBDA_GC_THRESHOLDS = gc.get_threshold()
#: Net allocations between young collections here (CPython's default: 700).
YOUNG_COLLECTION_EVERY = 50_000

gc.set_threshold(YOUNG_COLLECTION_EVERY)
