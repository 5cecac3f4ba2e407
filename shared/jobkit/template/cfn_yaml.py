"""YAML in and out: the template as YAML text, and CloudFormation YAML (with its
short tags, ``!Ref`` and friends) read as plain data."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from jobkit.core.errors import ConfigError


def to_yaml(template: Mapping[str, Any]) -> str:
    """The template as YAML, its keys in the order built."""
    return yaml.safe_dump(dict(template), sort_keys=False, width=120, allow_unicode=True)


def from_yaml(text: str, *, source: str) -> Any:
    """CloudFormation YAML as data; ``source`` names the file in the error if it is not YAML."""
    try:
        return yaml.load(text, Loader=_CloudFormationLoader)  # a SafeLoader that knows !Ref and friends
    except yaml.YAMLError as exc:
        raise ConfigError(source, "", f"not valid YAML: {exc}") from exc


class _CloudFormationLoader(yaml.SafeLoader):
    """SafeLoader that reads CloudFormation's short tags (!Ref, !GetAtt, ...) as their long forms."""


def _construct(loader: Any, tag_suffix: str, node: Any) -> dict[str, Any]:
    name = "Ref" if tag_suffix == "Ref" else f"Fn::{tag_suffix}"
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
        if tag_suffix == "GetAtt":
            value = value.split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    return {name: value}


_CloudFormationLoader.add_multi_constructor("!", _construct)
