"""IAM in the local cloud: every AWS call a function or the state machine makes is judged against its role
(after SAM's transform) by :class:`~chuixiang_local.cloud.iam.gate.IamGate`, as IAM would judge it."""
