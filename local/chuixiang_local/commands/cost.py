"""``chuixiang cost``: what AWS bills per 1 000 jobs, from the template and counts measured locally.

Four jobs run through the local cloud on the embedded model - one **generated**
(recipe and image), the same dish again (**cached**), one whose model answers 503
(**failed**), one generated with ``RecipeSections=parallel`` (**parallel**) - and
every AWS call they make is counted at the local endpoint
(:class:`~chuixiang_local.cloud.moto_server.RequestCounter`), the state transitions read from
each execution's history, the function invocations and log bytes recorded. Then,
per path:

* **Lambda**: every invocation billed at its function's ``MemorySize`` from the
  template (arm64). The recipe and image stages are billed their production
  durations (``--recipe-seconds``: 86 s, the median of three real generations;
  ``--image-seconds``; a failed job at ``RecipeTotalTimeoutMs``, the costliest way
  to fail); the short functions their local duration, scaled to the CPU share
  their memory buys (Lambda gives 1 vCPU at 1 769 MB).
* **Polling**: a client polls every ``pollAfterMs`` until the job ends: one HTTP API
  request, one api invocation and the reads of one GET (measured) each.
* **Progress**: one write every ``ProgressIntervalMs`` while the recipe streams
  (modelled: the local stream ends before the first one).
* **DynamoDB**: each write billed at the job item's final size in 1 KB units, each
  strongly consistent read in 4 KB units (an upper bound: earlier writes are smaller).
* **S3, logs, Secrets Manager, data transfer**: puts counted; the image stored for
  ``ImageRetentionDays`` and downloaded once (``--image-mb``); log bytes measured.

A recipe's model bill is priced in each ``RecipeSections`` mode, ``auto`` as the sections bench measured
it choosing (at the peak, and on a key capped across its streams); its AWS cost is that of the mode it chose.

Unit prices are named constants below, for us-east-1 on :data:`PRICED_ON`.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from stack_template import Template

from chuixiang.generation.sections import most_ranges_reserved, sections_reservation, whole_reservation
from chuixiang.polling import FIRST_POLL_MS
from chuixiang_local.cloud.local_cloud import LocalCloud
from chuixiang_local.gateway.api_client import LocalApi, http_event
from chuixiang_local.model.fake_model import ChatBehaviour, FakeModel

PRICED_ON = "2026-12-01"  #: us-east-1 list prices on this date (USD)
LAMBDA_ARM_GB_SECOND = 0.0000133334
LAMBDA_REQUEST = 0.20 / 1e6
SFN_STANDARD_TRANSITION = 0.025 / 1000
DDB_WRITE_UNIT = 0.625 / 1e6  #: on-demand write request unit (1 KB)
DDB_READ_UNIT = 0.125 / 1e6  #: on-demand read request unit (4 KB strongly consistent)
S3_PUT = 0.005 / 1000
S3_GET = 0.0004 / 1000
S3_GB_MONTH = 0.023
TRANSFER_OUT_GB = 0.09
HTTP_API_REQUEST = 1.00 / 1e6
LOGS_INGEST_GB = 0.50
SECRETS_API_CALL = 0.05 / 10_000
#: The model bill (assumptions, overridable): tokens at these prices (a mid-range chat model's), one image.
USD_PER_MILLION_PROMPT_TOKENS = 2.0
USD_PER_MILLION_COMPLETION_TOKENS = 10.0
MODEL_USD_PER_IMAGE = 0.04
#: Prompt tokens a provider's prefix cache held: billed at a fraction (OpenAI a half or a tenth by model,
#: DeepSeek about a tenth); a quarter of the prompt price here.
USD_PER_MILLION_CACHED_PROMPT_TOKENS = 0.5
#: Where ``chuixiang bench --sections`` wrote what it measured (the parallel assumptions below come from it).
SECTIONS_BENCH = Path(__file__).resolve().parents[3] / "docs" / "bench" / "sections.json"

FULL_CPU_MB = 1769  #: Lambda's memory for one full vCPU
WRITES = ("PutItem", "UpdateItem", "DeleteItem")
READS = ("GetItem", "Query")


@dataclass
class Assumptions:
    recipe_seconds: float = 86.0
    image_seconds: float = 30.0
    image_mb: float = 1.5
    #: A real recipe: ~1 600 tokens written (the write-up's measurement), a ~300-token prompt.
    recipe_prompt_tokens: int = 300
    recipe_completion_tokens: int = 1600
    usd_per_million_prompt_tokens: float = USD_PER_MILLION_PROMPT_TOKENS
    usd_per_million_completion_tokens: float = USD_PER_MILLION_COMPLETION_TOKENS
    usd_per_million_cached_prompt_tokens: float = USD_PER_MILLION_CACHED_PROMPT_TOKENS
    model_usd_per_image: float = MODEL_USD_PER_IMAGE
    #: From ``chuixiang bench --sections`` at the peak (docs/bench/sections.json; a test keeps them equal):
    #: RecipeSections=parallel's recipe seconds and its prompt and written tokens, in proportion to ``whole``'s
    #: above; and in each mode the share of the prompt a 64-token-block prefix cache (DeepSeek's) held.
    parallel_recipe_seconds: float = 25.0
    parallel_prompt_tokens: int = 3117
    parallel_completion_tokens: int = 1694
    whole_cached_share: float = 0.76
    parallel_cached_share: float = 0.8

    def tokens_usd(self, prompt: float, completion: float, cached: float = 0.0) -> float:
        """The bill of ``prompt`` tokens (``cached`` of them held by a prefix cache) and ``completion`` tokens."""
        return (
            (prompt - cached) * self.usd_per_million_prompt_tokens
            + cached * self.usd_per_million_cached_prompt_tokens
            + completion * self.usd_per_million_completion_tokens
        ) / 1e6

    @property
    def model_usd_per_recipe(self) -> float:
        return self.tokens_usd(self.recipe_prompt_tokens, self.recipe_completion_tokens)

    def recipe_usd_by_mode(self) -> dict[str, float]:
        """A recipe's model bill in each mode, without a prefix cache (OpenAI caches only prompts of 1,024 tokens
        or more: longer than either mode's) and with one that caches 64-token blocks (DeepSeek's); ``auto`` as
        the sections bench measured it choosing, at the peak and on a capped key (:meth:`auto_usd`)."""
        whole, parallel = self.recipe_prompt_tokens, self.parallel_prompt_tokens
        return {**self._fixed_modes_usd(whole, parallel), **self.auto_usd()}

    def auto_usd(self, bench: Path | None = None) -> dict[str, float]:
        """``auto``'s bill per recipe in each scenario of ``chuixiang bench --sections`` (no prefix cache): its
        jobs' prompt and written tokens there, in proportion to ``whole``'s in the same scenario, at this
        recipe's size. Named with what it chose (``auto at the peak (8/8 in sections)``)."""
        rows = json.loads((bench or SECTIONS_BENCH).read_text())["rows"]
        by = {(r["scenario"], r["mode"]): r for r in rows}
        out = {}
        for scenario in ("peak", "capped key"):
            auto, whole = by[(scenario, "auto")], by[(scenario, "whole")]
            prompt = self.recipe_prompt_tokens * auto["promptTokens"] / whole["promptTokens"]
            written = self.recipe_completion_tokens * auto["completionTokens"] / whole["completionTokens"]
            chose = f"{auto['chosen']['parallel']}/{auto['runs']} in sections"
            out[f"auto, {scenario} ({chose})"] = self.tokens_usd(prompt, written)
        return out

    def _fixed_modes_usd(self, whole: int, parallel: int) -> dict[str, float]:
        return {
            "whole": self.model_usd_per_recipe,
            "parallel": self.tokens_usd(parallel, self.parallel_completion_tokens),
            "whole, prefix cached": self.tokens_usd(
                whole, self.recipe_completion_tokens, whole * self.whole_cached_share
            ),
            "parallel, prefix cached": self.tokens_usd(
                parallel, self.parallel_completion_tokens, parallel * self.parallel_cached_share
            ),
        }


@dataclass
class PathCounts:
    """What one job of a path did, measured locally."""

    path: str
    calls: Counter[str] = field(default_factory=Counter)  #: service:Action -> count (the GET polls excluded)
    transitions: int = 0
    invocations: Counter[str] = field(default_factory=Counter)  #: function logical id -> count
    local_ms: Counter[str] = field(default_factory=Counter)  #: function logical id -> total local duration
    log_bytes: int = 0
    item_kb: float = 0.0  #: the job item's final size
    status: str = ""
    #: The recipe stage's model calls: (prompt, completion) tokens billed, all of them and those wasted.
    tokens_used: tuple[int, int] = (0, 0)
    tokens_wasted: tuple[int, int] = (0, 0)
    cached_prompt_tokens: int = 0  #: of the prompt tokens used, those the (fake) provider's prefix cache held


@dataclass
class PollCost:
    """One GET poll, measured: the AWS calls of one GET and the api invocation's local duration."""

    calls: Counter[str] = field(default_factory=Counter)
    local_ms: float = 0.0


#: The paths measured: one job each, in this order (``parallel``: a generated job with RecipeSections=parallel).
PATHS = (
    ("generated", "成本测算菜"),
    ("cached", "成本测算菜"),
    ("failed", "成本测算失败菜"),
    ("parallel", "成本测算分段"),
)


def measure(overrides: dict[str, str], work_dir: Path) -> tuple[list[PathCounts], PollCost]:
    """Each path's job through a local cloud (``parallel`` through one with ``RecipeSections=parallel``)."""
    paths: list[PathCounts] = []
    poll = PollCost()
    log_path = work_dir / "cost.log"
    with FakeModel(pace_s=0.0005) as fake, open(log_path, "w") as log:
        for sections in ("whole", "parallel"):
            chosen = {**overrides, "RecipeSections": sections}
            with LocalCloud(chosen, model_base_url=fake.base_url, work_dir=work_dir / sections, log=log) as cloud:
                for path, dish in PATHS:
                    if (path == "parallel") == (sections == "parallel"):
                        counts, measured = _measure_path(cloud, fake, log, log_path, path, dish)
                        paths.append(counts)
                        poll = poll if path == "parallel" else measured
            fake.chat_by_model.clear()
    return paths, poll


def _measure_path(
    cloud: LocalCloud, fake: FakeModel, log: Any, log_path: Path, path: str, dish: str
) -> tuple[PathCounts, PollCost]:
    """One job of ``path``: every AWS call, transition, invocation and log byte it made, and one GET of it."""
    api = LocalApi(cloud)
    sfn = cloud.client("stepfunctions")
    if path == "failed":
        model = cloud.template.parameters["RecipeModel"]
        for name in [*cloud.template.parameters["RecipeFallbackModels"].split(","), model]:
            if name:
                fake.chat_by_model[name] = ChatBehaviour(status=503)
    log.flush()
    before_calls, before_inv = cloud.requests.snapshot(), len(cloud.invocations)
    before_log = log_path.stat().st_size
    _status, body = api.post_dish(dish)
    job_id = body["jobId"]
    arn = cloud.execution_arn(job_id)
    while sfn.describe_execution(executionArn=arn)["status"] == "RUNNING":  # the polls are modelled
        fake.wait(0.05)
    log.flush()
    counts = PathCounts(
        path=path,
        calls=cloud.requests.snapshot() - before_calls,
        log_bytes=log_path.stat().st_size - before_log,
    )
    counts.calls -= Counter({"states:DescribeExecution": counts.calls["states:DescribeExecution"]})
    for logical_id, invocation in cloud.invocations[before_inv:]:
        counts.invocations[logical_id] += 1
        counts.local_ms[logical_id] += invocation.duration_ms
    history = sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]
    counts.transitions = sum(e["type"].endswith("StateEntered") for e in history)
    item = cloud.job_store().get(job_id) or {}
    counts.item_kb = len(json.dumps(item, default=str, ensure_ascii=False).encode()) / 1024
    calls = ((item.get("metrics") or {}).get("recipe") or {}).get("calls") or []
    counts.tokens_used = _tokens(calls)
    counts.tokens_wasted = _tokens([c for c in calls if c.get("outcome") != "ok"])
    counts.cached_prompt_tokens = sum(int(c.get("cachedPromptTokens") or 0) for c in calls)
    before = cloud.requests.snapshot()
    spec = cloud.template.function_by_dir("api")
    got = cloud.invoke(spec, http_event("GET", f"/recipes/{job_id}"))
    counts.status = json.loads(got.payload["body"])["status"]
    return counts, PollCost(calls=cloud.requests.snapshot() - before, local_ms=max(got.duration_ms, 1))


def _tokens(calls: list[dict[str, Any]]) -> tuple[int, int]:
    return (
        sum(int(c.get("promptTokens") or 0) for c in calls),
        sum(int(c.get("completionTokens") or 0) for c in calls),
    )


def model_tokens(paths: list[PathCounts], assume: Assumptions) -> dict[str, dict[str, float]]:
    """Per 1 000 jobs of each path: the recipe calls' tokens (measured on the local model: its recipe is
    shorter than a real one), the wasted ones, and what both cost at the assumed prices (the prompt tokens the
    fake's prefix cache held at the cached price)."""
    return {
        p.path: {
            "tokensUsed": 1000 * sum(p.tokens_used),
            "tokensWasted": 1000 * sum(p.tokens_wasted),
            "usdUsed": 1000 * assume.tokens_usd(*p.tokens_used, p.cached_prompt_tokens),
            "usdWasted": 1000 * assume.tokens_usd(*p.tokens_wasted),
        }
        for p in paths
    }


def estimate(
    paths: list[PathCounts], poll: PollCost, template: Template, assume: Assumptions
) -> dict[str, dict[str, float]]:
    """USD per 1 000 jobs of each path, by cost item."""
    memory = {s.logical_id: s.memory_mb for s in template.functions().values()}
    interval_s = template.number("ProgressIntervalMs") / 1000
    total_limit_s = template.number("RecipeTotalTimeoutMs") / 1000
    retention_months = template.number("ImageRetentionDays") / 30
    out: dict[str, dict[str, float]] = {}
    for p in paths:
        streamed_s = {
            "generated": assume.recipe_seconds,
            "parallel": assume.parallel_recipe_seconds,
            "failed": total_limit_s,
        }.get(p.path, 0.0)
        drawn = p.path in ("generated", "parallel")
        image_s = assume.image_seconds if drawn else 0.0
        job_s = streamed_s + image_s + 1
        polls = math.ceil(job_s * 1000 / FIRST_POLL_MS) + 1
        gb_s = 0.0
        for fn in p.invocations:  # a stage once per job; the short ones by their summed local time
            if fn == "RecipeFunction" and streamed_s:
                seconds = streamed_s
            elif fn == "ImageFunction" and image_s:
                seconds = image_s
            else:  # CPU-bound and short: the local time, at the CPU share this memory buys
                seconds = p.local_ms[fn] / 1000 * max(1.0, FULL_CPU_MB / memory[fn])
            gb_s += memory[fn] / 1024 * seconds
        api_s = poll.local_ms / 1000 * max(1.0, FULL_CPU_MB / memory["ApiFunction"])
        api_invocations = 1 + polls  # the POST (run in-process locally, so not in p.invocations) and the GETs
        gb_s += api_invocations * memory["ApiFunction"] / 1024 * api_s
        calls = p.calls + Counter({k: v * polls for k, v in poll.calls.items()})
        progress_writes = math.floor(streamed_s / interval_s)
        writes = sum(calls[f"dynamodb:{a}"] for a in WRITES) + progress_writes
        reads = sum(calls[f"dynamodb:{a}"] for a in READS)
        stored_image = drawn
        item = {
            "Lambda duration": gb_s * LAMBDA_ARM_GB_SECOND,
            "Lambda requests": (sum(p.invocations.values()) + api_invocations) * LAMBDA_REQUEST,
            "Step Functions transitions": p.transitions * SFN_STANDARD_TRANSITION,
            "DynamoDB writes": writes * math.ceil(max(p.item_kb, 1)) * DDB_WRITE_UNIT,
            "DynamoDB reads": reads * math.ceil(max(p.item_kb, 1) / 4) * DDB_READ_UNIT,
            "HTTP API requests": (1 + polls) * HTTP_API_REQUEST,
            "S3 puts, storage, download": calls["s3:PutObject"] * S3_PUT
            + (
                assume.image_mb / 1024 * (S3_GB_MONTH * retention_months + TRANSFER_OUT_GB) + S3_GET
                if stored_image
                else 0.0
            ),
            "CloudWatch Logs": (p.log_bytes + 200 * (1 + polls)) / 1024**3 * LOGS_INGEST_GB,
            "Secrets Manager": calls["secretsmanager:GetSecretValue"] * SECRETS_API_CALL,
        }
        out[p.path] = {k: v * 1000 for k, v in item.items()}
        out[p.path]["total"] = sum(out[p.path].values())
    return out


def report(
    overrides: dict[str, str], assume: Assumptions, measured: tuple[list[PathCounts], PollCost] | None = None
) -> dict[str, Any]:
    """The report of ``measured`` (:func:`measure` of ``overrides``), measured now unless given."""
    template = Template(overrides)
    if measured is None:
        with tempfile.TemporaryDirectory(prefix="cx-cost-") as work:
            measured = measure(overrides, Path(work))
    paths, poll = measured
    usd = estimate(paths, poll, template, assume)
    model = 1000 * (assume.model_usd_per_recipe + assume.model_usd_per_image)
    return {
        "pricedOn": PRICED_ON,
        "region": "us-east-1",
        "assumptions": asdict(assume),
        "modelTokensPer1000Jobs": model_tokens(paths, assume),
        "usdPer1000Jobs": usd,
        "modelUsdPer1000GeneratedJobs": model,
        "modelUsdPerRecipe": assume.recipe_usd_by_mode(),
        "tokensReservedAtAdmission": reserved_at_admission(template),
        "measured": {
            p.path: {
                "status": p.status,
                "calls": dict(p.calls),
                "transitions": p.transitions,
                "invocations": dict(p.invocations),
                "logBytes": p.log_bytes,
                "jobItemKb": round(p.item_kb, 1),
            }
            for p in paths
        },
        "perPoll": {"calls": dict(poll.calls), "localMs": poll.local_ms},
        "memoryMb": {s.logical_id: s.memory_mb for s in template.functions().values()},
    }


def reserved_at_admission(template: Template) -> dict[str, int]:
    """What one job's recipe calls reserve where a provider counts tokens per minute at admission (prompt +
    ``max_tokens``, every call): written whole, and in sections with the most steps ranges a plan may have."""
    max_tokens = int(template.function_by_dir("recipe").env.get("RECIPE_MAX_TOKENS") or 3000)
    most = most_ranges_reserved(max_tokens)
    return {
        "whole": whole_reservation(max_tokens).total,
        "sections": sections_reservation(most).total if most else 0,
        "sectionsRanges": most,
    }


def render(doc: dict[str, Any]) -> str:
    usd = doc["usdPer1000Jobs"]
    paths = list(usd)
    memory = ", ".join(f"{k.removesuffix('Function')} {v}" for k, v in doc["memoryMb"].items())
    lines = [
        f"AWS cost per 1 000 jobs, USD (us-east-1 prices of {doc['pricedOn']}; memory MB: {memory})",
        f"  {'':<28}" + "".join(f"{p:>12}" for p in paths),
    ]
    for item in usd[paths[0]]:
        lines.append(f"  {item:<28}" + "".join(f"{usd[p][item]:>12.4f}" for p in paths))
    a = doc["assumptions"]
    recipe_usd = (
        a["recipe_prompt_tokens"] * a["usd_per_million_prompt_tokens"]
        + a["recipe_completion_tokens"] * a["usd_per_million_completion_tokens"]
    ) / 1e6
    lines.append(
        f"  model bill, generated job: {doc['modelUsdPer1000GeneratedJobs']:.2f} "
        f"(${recipe_usd:.4f} a recipe of {a['recipe_completion_tokens']} tokens + "
        f"${a['model_usd_per_image']} an image): "
        f"AWS is {usd['generated']['total'] / doc['modelUsdPer1000GeneratedJobs']:.1%} of it"
    )
    by_mode = doc["modelUsdPerRecipe"]
    lines.append(
        "  a recipe's model bill by RecipeSections: "
        + "; ".join(f"{mode} ${usd:.4f} ({usd / by_mode['whole'] - 1:+.0%})" for mode, usd in by_mode.items())
        + f" (parallel: {a['parallel_prompt_tokens']} prompt tokens, {a['parallel_completion_tokens']} written)"
    )
    reserved = doc["tokensReservedAtAdmission"]
    lines.append(
        f"  tokens a job reserves where a key's tokens per minute are counted at admission (prompt + max_tokens): "
        f"whole {reserved['whole']}, in sections {reserved['sections']} ({reserved['sectionsRanges']} steps ranges, "
        f"{reserved['sections'] / reserved['whole']:.1f}x)"
    )
    tokens = doc["modelTokensPer1000Jobs"]
    lines.append(
        "  model tokens per 1 000 jobs, measured locally (used / wasted, USD): "
        + "; ".join(
            f"{p} {t['tokensUsed']:,.0f} / {t['tokensWasted']:,.0f} ({t['usdUsed']:.2f} / {t['usdWasted']:.2f})"
            for p, t in tokens.items()
        )
    )
    lines.append(
        f"  assumed: recipe {a['recipe_seconds']:g} s, image {a['image_seconds']:g} s "
        f"and {a['image_mb']:g} MB; measured locally: "
        + "; ".join(
            f"{p} {m['transitions']} transitions, {sum(m['calls'].values())} AWS calls"
            for p, m in doc["measured"].items()
        )
    )
    return "\n".join(lines)
