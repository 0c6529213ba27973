"""Lambda workers: a zygote forks initialised sandboxes; each serves invocations as the Lambda runtime would."""
