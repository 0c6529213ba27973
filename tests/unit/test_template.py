"""Admission control and API exposure in the template (what cannot run locally is checked here)."""

from __future__ import annotations

from stack_template import Template


def test_admission_control_and_exposure() -> None:
    doc = Template().doc
    params, resources = doc["Parameters"], doc["Resources"]
    concurrency = {"Ref": "RecipeConcurrency"}
    for name in ("RecipeFunction", "ImageFunction"):  # reserved only when asked (tests/runner/test_deploy_preflight.py)
        assert resources[name]["Properties"]["ReservedConcurrentExecutions"]["Fn::If"][0] == "HasReservedConcurrency"
    api_env = resources["ApiFunction"]["Properties"]["Environment"]["Variables"]
    assert api_env["ADMISSION_SLOTS"] == concurrency  # the API admits no more jobs than can run
    http = resources["RecipeApi"]["Properties"]
    cors = http["DefinitionBody"]["x-amazon-apigateway-cors"]
    assert cors["allowOrigins"] == {"Fn::Split": [",", {"Ref": "CorsAllowOrigins"}]}
    assert "*" not in params["CorsAllowOrigins"]["Default"]
    assert "retry-after" in cors["exposeHeaders"] and "authorization" in cors["allowHeaders"]
    assert http["DefaultRouteSettings"] == {
        "ThrottlingBurstLimit": {"Ref": "ApiThrottleBurstLimit"},
        "ThrottlingRateLimit": {"Ref": "ApiThrottleRateLimit"},
    }
    assert http["AccessLogSettings"]["DestinationArn"] == {"Fn::GetAtt": ["ApiAccessLogGroup", "Arn"]}
    routes = {
        (e["Properties"]["Method"], e["Properties"]["Path"])
        for e in resources["ApiFunction"]["Properties"]["Events"].values()
    }
    # ANY: a wrong method reaches the function, which answers 405 with Allow (API Gateway alone says 404).
    # OPTIONS: a browser's preflight gets its own route, outside the authorizer (tests/pipeline/test_first_deploy.py).
    assert routes == {
        ("ANY", "/recipes"),
        ("ANY", "/recipes/{jobId}"),
        ("GET", "/openapi.json"),
        ("OPTIONS", "/recipes"),
        ("OPTIONS", "/recipes/{jobId}"),
    }


def test_the_jwt_authorizer_is_optional_and_guards_both_recipe_routes() -> None:
    """JwtIssuer empty: no authorizer. Set: POST and GET /recipes need a token (JwtAudience required too);
    /openapi.json stays public. The OpenAPI body carries it because SAM's Auth takes no Fn::If."""
    doc = Template().doc
    assert doc["Parameters"]["JwtIssuer"]["Default"] == "" and doc["Parameters"]["JwtAudience"]["Default"] == ""
    assert doc["Conditions"]["HasJwt"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "JwtIssuer"}, ""]}]}
    assert doc["Rules"]["JwtNeedsAudience"]["Assertions"][0]["Assert"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "JwtAudience"}, ""]}]
    }
    body = doc["Resources"]["RecipeApi"]["Properties"]["DefinitionBody"]
    guarded = {"Fn::If": ["HasJwt", [{"JwtAuthorizer": []}], {"Ref": "AWS::NoValue"}]}
    for path in ("/recipes", "/recipes/{jobId}"):
        assert body["paths"][path]["x-amazon-apigateway-any-method"]["security"] == guarded, path
    assert "security" not in body["paths"]["/openapi.json"]["get"]
    condition, scheme, absent = body["components"]["securitySchemes"]["Fn::If"]
    assert condition == "HasJwt" and absent == {"Ref": "AWS::NoValue"}
    authorizer = scheme["JwtAuthorizer"]["x-amazon-apigateway-authorizer"]
    assert authorizer["type"] == "jwt" and authorizer["identitySource"] == "$request.header.Authorization"
    assert authorizer["jwtConfiguration"] == {
        "issuer": {"Ref": "JwtIssuer"},
        "audience": {"Fn::Split": [",", {"Ref": "JwtAudience"}]},
    }
    # Every route the function's events declare is in the body (SAM adds integrations to these).
    events = {e["Properties"]["Path"] for e in doc["Resources"]["ApiFunction"]["Properties"]["Events"].values()}
    assert events == set(body["paths"])
