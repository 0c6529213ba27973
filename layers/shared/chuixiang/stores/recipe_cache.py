"""The recipe cache (``pk = DISH#<dish>``): a dish written once is served again, its picture with it, until the
bucket's lifecycle rule would delete that picture."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ..clock import now_utc
from ..settings import Settings
from .table import dish_key, from_dynamo, jobs_table, number, set_expression

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.service_resource import Table


class RecipeCache:
    def __init__(self, settings: Settings, table: Table | None = None) -> None:
        self.settings = settings
        self.table = table or jobs_table(settings)

    def get(self, dish: str) -> dict[str, Any] | None:
        """The cached recipe of ``dish``, unless it has expired (DynamoDB's TTL deletes it up to days late)."""
        item = self.table.get_item(Key=dish_key(dish), ConsistentRead=True).get("Item")
        if not item or not item.get("recipe") or number(item.get("expiresAt", 0)) <= now_utc().timestamp():
            return None
        cached: dict[str, Any] = from_dynamo(item)
        return cached

    def expiry(self) -> int:
        """When an entry written now must be forgotten: a day before the bucket deletes an image drawn now
        (the lifecycle rule rounds up to the next midnight UTC)."""
        return int((now_utc() + timedelta(days=self.settings.image_retention_days - 1)).timestamp())

    def put(self, dish: str, *, recipe: dict[str, Any] | None = None, image_key: str | None = None) -> None:
        """A new recipe drops the old entry's image (a new one is being drawn); a new image restarts
        the entry's life, so the entry never outlives the picture it points at."""
        fields: dict[str, Any] = {"expiresAt": self.expiry()}
        if recipe is not None:
            fields["recipe"] = recipe
        if image_key is not None:
            fields["imageKey"] = image_key
        expr, names, values = set_expression(fields)
        if recipe is not None and image_key is None:
            names["#image"] = "imageKey"
            expr += " REMOVE #image"
        self.table.update_item(
            Key=dish_key(dish), UpdateExpression=expr, ExpressionAttributeNames=names, ExpressionAttributeValues=values
        )
