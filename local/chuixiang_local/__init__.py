"""Local tooling: run the SAM application without Docker or an AWS account.

The runner reads ``template.yaml`` and the real ASL, deploys them into moto
(DynamoDB, S3, Secrets Manager, Step Functions executing the ASL) and runs each
Lambda invocation in its own Python process, killed at the function's Timeout.
"""
