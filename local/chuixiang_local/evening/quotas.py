"""The limits an evening runs into: a model provider's (two real providers' documented values as presets) and
AWS's (the documented defaults of a new account, by region group), and the windows that enforce them."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class Provider:
    """A model provider's limits on one key: requests and tokens per minute, and concurrent streams (``None``:
    the provider documents no such limit)."""

    name: str
    source: str
    rpm: int
    tpm: int
    streams: int | None = None


#: Documented default limits (checked 2026-12-03). Model Studio counts per Alibaba Cloud account and model;
#: OpenAI per organisation and model at usage tier 1 (after the first $5).
PROVIDERS: dict[str, Provider] = {
    "qwen-plus": Provider(
        "Alibaba Cloud Model Studio, qwen-plus",
        "https://help.aliyun.com/zh/model-studio/user-guide/rate-limit",
        rpm=15_000,
        tpm=1_200_000,
    ),
    "gpt-4o-mini-tier1": Provider(
        "OpenAI gpt-4o-mini, usage tier 1",
        "https://platform.openai.com/docs/guides/rate-limits",
        rpm=500,
        tpm=200_000,
    ),
    # Moonshot caps a key's requests at once by its account's cumulative top-up (checked 2026-12-04).
    "moonshot-tier0": Provider(
        "Moonshot (Kimi), tier 0", "https://platform.moonshot.ai/docs/pricing/limits", rpm=3, tpm=500_000, streams=1
    ),
    "moonshot-tier1": Provider(
        "Moonshot (Kimi), tier 1",
        "https://platform.moonshot.ai/docs/pricing/limits",
        rpm=200,
        tpm=2_000_000,
        streams=50,
    ),
}


@dataclass(frozen=True)
class AwsQuotas:
    """A new account's defaults in a region group (the Step Functions developer guide, *Quotas*; Lambda's
    concurrent executions; DynamoDB's on-demand throughput of a new table)."""

    region: str
    start_execution_bucket: int
    start_execution_refill_s: float
    transitions_bucket: int
    transitions_refill_s: float
    lambda_concurrency: int = 1000
    dynamodb_new_table_wcu_s: int = 4000


AWS_REGIONS: dict[str, AwsQuotas] = {
    "us-east-1": AwsQuotas("us-east-1", 1300, 300, 5000, 5000),
    "cn-north-1": AwsQuotas("cn-north-1", 800, 150, 800, 800),
}


class TokenBucket:
    """A bucket of ``size`` tokens refilled at ``rate`` a second: how AWS throttles an API."""

    def __init__(self, size: int, rate: float) -> None:
        self.size, self.rate, self.tokens, self.at = size, rate, float(size), 0.0

    def take(self, now: float, n: int = 1) -> bool:
        self.tokens = min(self.size, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens < n:
            return False
        self.tokens -= n
        return True


class MinuteWindow:
    """What was taken in the last 60 s (requests or tokens): a provider's per-minute limit, as a sliding window."""

    def __init__(self, limit: int) -> None:
        self.limit, self.total = limit, 0
        self.taken: deque[tuple[float, int]] = deque()

    def used(self, now: float) -> int:
        while self.taken and self.taken[0][0] <= now - 60:
            self.total -= self.taken.popleft()[1]
        return self.total

    def fits(self, now: float, n: int) -> bool:
        return self.used(now) + n <= self.limit

    def take(self, now: float, n: int) -> None:
        self.taken.append((now, n))
        self.total += n

    def fits_at(self, now: float, n: int) -> float:
        """The earliest moment ``n`` more fit (``now`` if they do; never, if ``n`` alone is over the limit)."""
        used = self.used(now)
        if used + n <= self.limit:
            return now
        if n > self.limit:
            return float("inf")
        for at, taken in self.taken:
            used -= taken
            if used + n <= self.limit:
                return at + 60
        return now + 60
