"""Admission control and API exposure in the template (what cannot run locally is checked here)."""

from __future__ import annotations

from chuixiang_local.template import Template


def test_admission_control_and_exposure() -> None:
    doc = Template().doc
    params, resources = doc["Parameters"], doc["Resources"]
    concurrency = {"Ref": "RecipeConcurrency"}
    for name in ("RecipeFunction", "ImageFunction"):  # the model provider's quota and the account are protected
        assert resources[name]["Properties"]["ReservedConcurrentExecutions"] == concurrency, name
    api_env = resources["ApiFunction"]["Properties"]["Environment"]["Variables"]
    assert api_env["MAX_JOBS_IN_FLIGHT"] == concurrency  # the API admits no more jobs than can run
    http = resources["RecipeApi"]["Properties"]
    assert http["CorsConfiguration"]["AllowOrigins"] == {"Ref": "CorsAllowOrigins"}
    assert "*" not in params["CorsAllowOrigins"]["Default"]
    assert "retry-after" in http["CorsConfiguration"]["ExposeHeaders"]
    assert http["DefaultRouteSettings"] == {"ThrottlingBurstLimit": {"Ref": "ApiThrottleBurstLimit"},
                                            "ThrottlingRateLimit": {"Ref": "ApiThrottleRateLimit"}}
    assert http["AccessLogSettings"]["DestinationArn"] == {"Fn::GetAtt": ["ApiAccessLogGroup", "Arn"]}
    routes = {(e["Properties"]["Method"], e["Properties"]["Path"])
              for e in resources["ApiFunction"]["Properties"]["Events"].values()}
    # ANY: a wrong method reaches the function, which answers 405 with Allow (API Gateway alone says 404).
    assert routes == {("ANY", "/recipes"), ("ANY", "/recipes/{jobId}"), ("GET", "/openapi.json")}
