"""Configuration: schema (spec), loading with path-qualified errors (load), durations (units)."""

from sloguard.config.load import ConfigError, load_config, load_config_text
from sloguard.config.spec import Config

__all__ = ["Config", "ConfigError", "load_config", "load_config_text"]
