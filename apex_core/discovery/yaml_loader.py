"""Read a ``bench.yaml`` with PyYAML (the ``discover`` extra), imported only when a folder is searched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

YAML_HINT = "pip install 'apex-bench[discover]'"


def yaml_missing_reason() -> str:
    """Why bench.yaml files cannot be read here ("" when PyYAML imports)."""
    try:
        import yaml  # noqa: F401
    except ImportError:
        return f"reading bench.yaml files needs PyYAML, which is not installed ({YAML_HINT})"
    return ""


def load_yaml(path: Path) -> Any:
    """The document in ``path``, loaded safely (no Python tags); a ``ValueError`` names a syntax error."""
    import yaml

    try:
        with path.open(encoding="utf-8") as handle:
            return yaml.safe_load(handle)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ValueError(f"not valid YAML{where}: {problem}") from None
