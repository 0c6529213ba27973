"""The recipe cache: an entry never outlives the picture it points at, and a new recipe drops the old picture."""

from __future__ import annotations

from typing import Any

from stack_template import Template

from chuixiang.settings import Settings
from chuixiang.stores.recipe_cache import RecipeCache
from chuixiang.stores.table import dish_key


def test_cache_entry_expires_before_its_image(table: Any, scaled_template: Template) -> None:
    retention = int(scaled_template.number("ImageRetentionDays"))
    lifecycle = scaled_template.doc["Resources"]["ImagesBucket"]["Properties"]["LifecycleConfiguration"]["Rules"][0]
    assert lifecycle["ExpirationInDays"] == {"Ref": "ImageRetentionDays"}
    cache = RecipeCache(Settings.model_validate({"IMAGE_RETENTION_DAYS": str(retention)}), table=table)
    cache.put("红烧肉", recipe={"name": "红烧肉"})
    cache.put("红烧肉", image_key="images/a.png")
    entry = cache.get("红烧肉")
    assert entry and entry["imageKey"] == "images/a.png"
    days_left = (entry["expiresAt"] - entry_time(entry)) / 86400
    assert retention - 1.01 < days_left <= retention - 1  # a day before the bucket deletes the image
    # A new recipe for the dish drops the old picture's key (a new one is being drawn).
    cache.put("红烧肉", recipe={"name": "红烧肉 v2"})
    assert "imageKey" not in (cache.get("红烧肉") or {})
    # Past its expiry the entry is a miss, even before DynamoDB's TTL has deleted it.
    table.update_item(
        Key=dish_key("红烧肉"), UpdateExpression="SET expiresAt = :past", ExpressionAttributeValues={":past": 1}
    )
    assert cache.get("红烧肉") is None


def entry_time(entry: dict[str, Any]) -> float:
    from chuixiang.clock import parse_iso

    return parse_iso(entry["updatedAt"]).timestamp()
