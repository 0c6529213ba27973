"""The local cloud: moto with our patches (each in one place), the deployed stack, the EventBridge stand-in."""
