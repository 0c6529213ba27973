"""Read ``template.yaml`` like CloudFormation would, for the local runner and the ladder.

Its nested observability template is read into it (:mod:`stack_template.nested`): one stack, as the app.

Parameters get their defaults, then ``--parameter-overrides`` (checked against
the declared type and bounds, as ``sam deploy`` would). Intrinsics used by the
template (Ref, GetAtt, Sub, Join) are resolved against the names the local
engine gives each resource. Nothing here repeats a number from the template.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stack_template.cfn_yaml import CfnLoader, ConfigError, load_cfn
from stack_template.nested import inline_nested, nested_paths

__all__ = [
    "ACCOUNT",
    "NO_VALUE",
    "REGION",
    "REPO_ROOT",
    "CfnLoader",
    "ConfigError",
    "FunctionSpec",
    "Template",
    "inline_nested",
    "load_cfn",
    "nested_paths",
    "parse_overrides",
    "unqualified",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
ACCOUNT = "123456789012"
REGION = "us-east-1"


#: What ``{"Ref": "AWS::NoValue"}`` resolves to: dropped from the list or mapping that holds it.
NO_VALUE: Any = object()


def parse_overrides(pairs: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs or []:
        for item in pair.split():
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise ConfigError(f"parameter override {item!r} is not KEY=VALUE")
            out[key.strip()] = value.strip().strip("\"'")
    return out


@dataclass
class FunctionSpec:
    logical_id: str
    name: str
    code_dir: Path
    handler: str
    timeout_s: int
    memory_mb: int
    env: dict[str, str]
    #: The layer directories this version runs with (empty: the template's, from the work tree).
    layers: tuple[Path, ...] = ()

    @property
    def arn(self) -> str:
        return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{self.name}"


def unqualified(function_arn: str) -> str:
    """A Lambda ARN without its version or alias (``…:function:name:3`` -> ``…:function:name``)."""
    parts = function_arn.split(":")
    return ":".join(parts[:7]) if len(parts) > 7 and parts[5] == "function" else function_arn


class Template:
    def __init__(
        self,
        overrides: dict[str, str] | None = None,
        root: Path = REPO_ROOT,
        physical: dict[str, dict[str, str]] | None = None,
    ) -> None:
        self.root = root
        #: The app as one stack: ``template.yaml`` with its nested observability read into it (:mod:`.nested`).
        self.doc: dict[str, Any] = inline_nested(
            load_cfn((root / "template.yaml").read_text()),
            root,
        )
        self.resources: dict[str, Any] = self.doc["Resources"]
        self.parameters = self._parameters(overrides or {})
        self.physical = physical or self.default_physical()
        #: The published version each function's ``!Ref <Function>.Version`` names (the local cloud publishes
        #: "1" when it deploys, and the next on each release).
        self.function_versions: dict[str, str] = {}

    # --- parameters ----------------------------------------------------------------------

    def _parameters(self, overrides: dict[str, str]) -> dict[str, str]:
        declared: dict[str, Any] = self.doc.get("Parameters", {})
        unknown = sorted(set(overrides) - set(declared))
        if unknown:
            raise ConfigError(
                f"unknown parameter(s) {', '.join(unknown)}; template declares {', '.join(sorted(declared))}"
            )
        values: dict[str, str] = {}
        for name, spec in declared.items():
            raw = overrides.get(name, spec.get("Default"))
            if raw is None:
                values[name] = ""
                continue
            value = str(raw)
            if spec.get("Type") == "Number":
                try:
                    number = float(value)
                except ValueError:
                    raise ConfigError(f"{name}={value!r} is not a number") from None
                if "MinValue" in spec and number < float(spec["MinValue"]):
                    raise ConfigError(f"{name}={value} is below its MinValue {spec['MinValue']}")
                if "MaxValue" in spec and number > float(spec["MaxValue"]):
                    raise ConfigError(f"{name}={value} is above its MaxValue {spec['MaxValue']}")
            if "AllowedValues" in spec and value not in [str(v) for v in spec["AllowedValues"]]:
                raise ConfigError(f"{name}={value!r} is not one of {spec['AllowedValues']}")
            values[name] = value
        return values

    def number(self, name: str) -> float:
        return float(self.parameters[name])

    # --- resources -----------------------------------------------------------------------

    def of_type(self, rtype: str) -> dict[str, Any]:
        return {k: v for k, v in self.resources.items() if v["Type"] == rtype}

    def deployed(self, rtype: str) -> dict[str, Any]:
        """The resources of that type these parameters create (a conditional one only when its condition holds)."""
        return {
            k: v for k, v in self.of_type(rtype).items() if not v.get("Condition") or self.condition(v["Condition"])
        }

    def default_physical(self, prefix: str = "chuixiang-local-") -> dict[str, dict[str, str]]:
        """Local names and ARNs for every resource (what Ref / GetAtt resolve to)."""
        out: dict[str, dict[str, str]] = {}
        for lid, res in self.resources.items():
            name = f"{prefix}{lid}"
            rtype = res["Type"]
            if rtype == "AWS::Serverless::Function":
                arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}"
                out[lid] = {"Ref": name, "Arn": arn}
            elif rtype == "AWS::Serverless::StateMachine":
                arn = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{name}"
                out[lid] = {"Ref": arn, "Arn": arn, "Name": name}
            elif rtype == "AWS::DynamoDB::Table":
                out[lid] = {"Ref": name, "Arn": f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{name}"}
            elif rtype == "AWS::S3::Bucket":
                bucket = name.lower()
                out[lid] = {"Ref": bucket, "Arn": f"arn:aws:s3:::{bucket}"}
            elif rtype == "AWS::SQS::Queue":  # Ref is the queue's URL; GetAtt QueueName its name
                url = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{name}"
                out[lid] = {"Ref": url, "Arn": f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}", "QueueName": name}
            else:
                out[lid] = {"Ref": name, "Arn": name}
        return out

    def resolve(self, value: Any) -> Any:
        """``value`` with its intrinsics resolved; ``Fn::If`` by the template's Conditions, and what resolves to
        ``AWS::NoValue`` left out of its list or mapping, as CloudFormation does."""
        if isinstance(value, list):
            return [v for v in (self.resolve(v) for v in value) if v is not NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref" and arg == "AWS::NoValue":
                return NO_VALUE
            if key == "Fn::If":
                name, if_true, if_false = arg
                return self.resolve(if_true if self.condition(name) else if_false)
            if key == "Ref":
                return self._ref(arg)
            if key == "Fn::GetAtt":
                lid, attr = arg
                return self.physical[lid][attr]
            if key == "Fn::Sub":
                text, extra = (arg, {}) if isinstance(arg, str) else (arg[0], self.resolve(arg[1]))
                return re.sub(
                    r"\$\{([^}!]+)\}",
                    lambda m: str(extra[m.group(1)] if m.group(1) in extra else self._sub_name(m.group(1))),
                    text,
                )
            if key == "Fn::Join":
                sep, items = arg
                return sep.join(str(i) for i in self.resolve(items))
        return {k: v for k, v in ((k, self.resolve(v)) for k, v in value.items()) if v is not NO_VALUE}

    def condition(self, name: str) -> bool:
        """A condition of the template's ``Conditions``, with this deployment's parameters."""
        return self._holds(self.doc.get("Conditions", {})[name])

    def _holds(self, expr: Any) -> bool:
        ((key, arg),) = expr.items()
        if key == "Condition":
            return self.condition(arg)
        if key == "Fn::Equals":
            return str(self.resolve(arg[0])) == str(self.resolve(arg[1]))
        if key == "Fn::Not":
            return not self._holds(arg[0])
        if key == "Fn::And":
            return all(self._holds(a) for a in arg)
        if key == "Fn::Or":
            return any(self._holds(a) for a in arg)
        raise ConfigError(f"condition function {key} is not understood locally")

    def _ref(self, name: str) -> str:
        pseudo = {
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT,
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": "chuixiang-local",
        }
        if name in pseudo:
            return pseudo[name]
        lid, dot, attr = name.partition(".")
        if dot and attr in ("Version", "Alias"):  # SAM's AutoPublishAlias references: qualified function ARNs
            qualifier = self.function_versions.get(lid, "1") if attr == "Version" else "live"
            return f"{self.physical[lid]['Arn']}:{qualifier}"
        if name in self.parameters:
            return self.parameters[name]
        return self.physical[name]["Ref"]

    def _sub_name(self, name: str) -> str:
        if "." in name:
            lid, attr = name.split(".", 1)
            return self.physical[lid][attr]
        return self._ref(name)

    def functions(self) -> dict[str, FunctionSpec]:
        glob = self.doc.get("Globals", {}).get("Function", {})
        out = {}
        for lid, res in self.of_type("AWS::Serverless::Function").items():
            props = res["Properties"]
            env = {
                **glob.get("Environment", {}).get("Variables", {}),
                **props.get("Environment", {}).get("Variables", {}),
            }
            out[lid] = FunctionSpec(
                logical_id=lid,
                name=self.physical[lid]["Ref"],
                code_dir=self.root / props["CodeUri"],
                handler=props["Handler"],
                timeout_s=int(float(self.resolve(props.get("Timeout", glob.get("Timeout", 3))))),
                memory_mb=int(self.resolve(props.get("MemorySize", glob.get("MemorySize", 128)))),
                env={k: str(self.resolve(v)) for k, v in env.items()},
            )
        return out

    def function_by_dir(self, name: str) -> FunctionSpec:
        """``recipe`` / ``RecipeFunction`` / ``functions/recipe`` -> its spec."""
        for spec in self.functions().values():
            if (
                name in (spec.logical_id, spec.code_dir.name, spec.name)
                or spec.code_dir.resolve() == (self.root / name).resolve()
            ):
                return spec
        raise ConfigError(
            f"no function {name!r} in template.yaml "
            f"(have: {', '.join(s.code_dir.name for s in self.functions().values())})"
        )

    def state_machine(self) -> tuple[str, str, dict[str, Any]]:
        """(logical id, physical ARN, definition with DefinitionSubstitutions applied)."""
        ((lid, res),) = self.of_type("AWS::Serverless::StateMachine").items()
        props = res["Properties"]
        text = (self.root / props["DefinitionUri"]).read_text()
        subs = {k: str(self.resolve(v)) for k, v in props.get("DefinitionSubstitutions", {}).items()}
        missing = sorted(set(re.findall(r"\$\{(\w+)\}", text)) - set(subs))
        if missing:
            raise ConfigError(f"ASL placeholders without a substitution: {', '.join(missing)}")
        text = re.sub(r"\$\{(\w+)\}", lambda m: subs[m.group(1)], text)
        try:
            definition = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"ASL is not valid JSON after substitution: {exc}") from None
        return lid, self.physical[lid]["Arn"], definition
