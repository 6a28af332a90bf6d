"""The workload provider of ``bench.yaml`` folders (entry-point group ``apex_bench.workload_providers``).

Registered in pyproject.toml as any third-party provider would be. The folders come from
``APEX_BENCH_DISCOVER`` (``--discover``, exported by the command line for the workers) and
the config file's ``discover`` key. Every ``bench.yaml`` under them becomes one workload, or
an error row naming the file and the field when it cannot be used.
"""

from __future__ import annotations

from pathlib import Path

from apex_core.config_file import current_config, discover_folders
from apex_core.discovery.spec import BenchSpecError, declared_name, parse_spec
from apex_core.discovery.workload import DiscoveredWorkload
from apex_core.discovery.yaml_loader import load_yaml, yaml_missing_reason
from apex_core.errors import UsageError
from apex_core.providers import Provided

BENCH_FILE = "bench.yaml"


def bench_files(folder: Path) -> list[Path]:
    """Every ``bench.yaml`` under ``folder`` (itself included), in a stable order, hidden folders left out."""
    return sorted(p for p in folder.rglob(BENCH_FILE)
                  if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts))


def discovered_workloads() -> dict[str, object]:
    """``{name: DiscoveredWorkload | Provided.broken(...)}`` for the bench.yaml files of the folders."""
    path, config = current_config()
    folders = discover_folders(config, path)
    if not folders:
        return {}

    missing = yaml_missing_reason()
    if missing:
        raise UsageError(missing)
    entries: dict[str, object] = {}
    declared_in: dict[str, Path] = {}
    for folder in folders:
        if not folder.is_dir():
            entries[folder.name or str(folder)] = Provided.broken(f"discover folder {folder} does not exist",
                                                                  str(folder))
            continue
        for file in bench_files(folder):
            name, entry = _load(file)
            if name in declared_in:
                entry = Provided.broken(f"workload {name!r} is declared by {declared_in[name]} and {file}; "
                                        "names must be unique", str(file))
            declared_in.setdefault(name, file)
            entries[name] = entry
    return entries


def _load(file: Path) -> tuple[str, object]:
    try:
        data = load_yaml(file)
    except (OSError, ValueError) as exc:
        return file.parent.name, Provided.broken(f"{file}: {exc}", str(file))
    name = declared_name(data, file)
    try:
        return name, Provided(DiscoveredWorkload(parse_spec(data, file)), source=str(file))
    except BenchSpecError as exc:
        return name, Provided.broken(str(exc), str(file))
