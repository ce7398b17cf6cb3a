"""What the weights tests share: the dev stack's weights place, the download switch, and a script loaded as a module."""

from __future__ import annotations

import importlib.util
from types import ModuleType
from typing import Any

from components.model.config.serving_settings import ServingSettings
from tests.stack_config import P, stack_file_config

JOB = "kubernetes:batch/v1:Job"
ON = {f"{P}:serving": {"weightsDownload": {"enabled": True}}}


def defaults() -> ServingSettings:
    return ServingSettings(weights_bucket="bbb")


def dev_serving() -> tuple[str, str]:
    """The dev stack's weights bucket and (default) model path."""
    return stack_file_config("dev")[f"{P}:serving"]["weightsBucket"], defaults().model_path


def script(path: Any) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
