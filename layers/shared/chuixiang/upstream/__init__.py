"""Talking to the model: the guarded transport, the retry rule, the chat stream and image calls."""
