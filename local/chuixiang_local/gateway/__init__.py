"""The API Gateway stand-in: an ASGI front for the api function, the JWT authorizer, a test client."""
