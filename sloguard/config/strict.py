"""The strict base every config model shares (unknown keys rejected, frozen), secrets by file or env only."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sloguard.config.units import Duration

Name = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,62}$")]
PositiveDuration = Annotated[Duration, Field(gt=0)]
SECRET_FIELDS = ("token", "api_key", "webhook_url", "password", "url_with_secret")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SecretSource(Strict):
    """Mixin: secrets come only from `<field>_file` or `<field>_env`, never inline."""

    @model_validator(mode="before")
    @classmethod
    def _no_inline_secrets(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key in SECRET_FIELDS:
                if key in data and f"{key}_file" in cls.model_fields:
                    raise ValueError(f"inline '{key}' is not allowed: use {key}_file or {key}_env")
        return data
