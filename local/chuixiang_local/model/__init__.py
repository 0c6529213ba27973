"""The fake model (an OpenAI-compatible server that misbehaves on purpose) and its profiles."""
