"""Lambda's 4 KB of environment, measured as Lambda measures it: the JSON of
the variables map, key names, quotes (escaped ones too), commas and brackets,
with references resolved. jobkit resolves the prefix at its longest (16
characters) and each queue URL in the longest Region and partition, so a
function that fits here fits under any prefix and in any account."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from jobkit.core.errors import ConfigError
from jobkit.declaration.config import Declaration, parse_declaration
from jobkit.template import build
from jobkit.template.resources import environment_size


def declaration(fields: int) -> Declaration:
    """4 types with params schemas of ``fields`` fields, all taken by the push endpoint."""
    schema = {
        "type": "object",
        "properties": {f"field_{n}": {"type": "string", "maxLength": 200} for n in range(fields)},
        "required": [f"field_{n}" for n in range(fields)],
        "additionalProperties": False,
    }
    types = {f"type{n}": {"class": "m:C", "params_schema": schema} for n in range(4)}
    return parse_declaration({"types": types, "push_endpoint": {"types": list(types)}}, source="test")


def resolved_by_hand(variables: dict[str, Any]) -> dict[str, str]:
    """The variables as a worst-case deployment would hold them (this test's own resolution)."""
    url = "https://sqs." + "x" * 15 + ".amazonaws.com.cn/" + "1" * 12 + "/"
    prefix = "p" * 16

    def one(value: Any) -> str:
        if isinstance(value, str):
            return value
        if value == {"Ref": "Prefix"}:
            return prefix
        if value == {"Ref": "PayloadBucket"}:  # a bucket's name: at most 63 characters
            return "b" * 63
        text = value["Fn::Sub"].replace("${Prefix}", prefix)
        return re.sub(
            r"\$\{(\w+?)(DeadLetterQueue|Queue)\}",
            lambda m: (
                url + prefix + "-" + m.group(1)[0].lower() + m.group(1)[1:] + ("-dlq" if "Dead" in m.group(2) else "")
            ),
            text,
        )

    return {key: one(value) for key, value in variables.items()}


def test_the_measure_is_the_json_of_the_resolved_variables() -> None:
    built = build(declaration(4), {}, base_dir=Path("."))
    for logical_id, resource in built["Resources"].items():
        if resource["Type"] != "AWS::Serverless::Function":
            continue
        variables = resource["Properties"]["Environment"]["Variables"]
        expected = len(json.dumps(resolved_by_hand(variables), separators=(",", ":")).encode())
        assert environment_size(declaration(4), variables) == expected, logical_id


def test_a_function_whose_resolved_environment_is_over_4_kb_is_refused() -> None:
    # 4 types with 12-field schemas: the endpoint's declaration (defaults left out)
    # is about 3,300 bytes of text, but Lambda escapes the inner quotes of its JSON
    # and resolves the URLs. (Before defaults were left out, 5 fields were too many.)
    with pytest.raises(ConfigError, match=r"the push endpoint would need 4\d{3} bytes") as refused:
        build(declaration(12), {}, base_dir=Path("."))
    assert "push_endpoint.types" in str(refused.value)
    build(declaration(11), {}, base_dir=Path("."))
