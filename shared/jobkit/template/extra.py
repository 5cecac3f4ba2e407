"""The user's own template sections: ``infra/template-extra.yaml``, merged into
the generated template, never overwriting a name jobkit uses."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jobkit.core.errors import ConfigError
from jobkit.template.cfn_yaml import from_yaml

SECTIONS_USERS_MAY_EXTEND = ("Parameters", "Conditions", "Resources", "Outputs")


def load_extra(path: Path) -> dict[str, Any] | None:
    """The user's own template sections, if the file exists."""
    if not path.exists():
        return None
    loaded = from_yaml(path.read_text(), source=str(path))
    if loaded is None:
        return None
    if not isinstance(loaded, dict):
        raise ConfigError(str(path), "", "must be a mapping of template sections")
    unknown = set(loaded) - set(SECTIONS_USERS_MAY_EXTEND)
    if unknown:
        raise ConfigError(str(path), sorted(unknown)[0], f"only {', '.join(SECTIONS_USERS_MAY_EXTEND)} may be extended")
    return loaded


def merge_extra(template: dict[str, Any], extra: Mapping[str, Any]) -> None:
    """Add the user's sections to ``template``; a name it already has is an error."""
    for section in SECTIONS_USERS_MAY_EXTEND:
        additions = extra.get(section) or {}
        taken = set(template[section]) & set(additions)
        if taken:
            raise ConfigError(
                "infra/template-extra.yaml",
                f"{section}.{sorted(taken)[0]}",
                "is a name jobkit's generated template uses; pick another",
            )
        template[section].update(additions)
