"""Plugin providers: entry points that make several backends or workloads from configuration.

A plain entry point names one class. A provider (groups ``apex_bench.backend_providers``
and ``apex_bench.workload_providers``) names a zero-argument callable that returns
``{name: plugin}``, for families of plugins that are configured rather than written:
one backend per external command of a config file, one workload per ``bench.yaml``.
Each value is a ready ``Backend``/``Workload`` instance, or a ``Provided`` when the
provider wants to name the plugin's source or say why one entry could not be made
(it then becomes an error row like a plugin that fails to import).

Providers run wherever the registry is built, the worker processes included, so their
configuration must come from the environment or files, not from the process that
started the run (``apex_core.config_file`` holds the variables the CLI exports).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from apex_core.errors import describe_exception


@attrs.frozen
class FoundPlugin:
    """One entry point as discovered: its loaded class or the reason it failed."""

    name: str
    source: str
    plugin: Any = None
    error: str = ""


@attrs.frozen
class Provided:
    """One entry of a provider's answer: the plugin, or why it could not be made, and where it came from."""

    plugin: Any = None
    error: str = ""
    source: str = ""  # e.g. the config file or bench.yaml the entry came from

    @classmethod
    def broken(cls, reason: str, source: str = "") -> Provided:
        return cls(error=reason, source=source)


class _Made:
    """A zero-argument factory of an instance a provider already built (the registry constructs by calling)."""

    def __init__(self, instance: Any) -> None:
        self.instance = instance

    def __call__(self) -> Any:
        return self.instance


def expand_providers(found: list[FoundPlugin]) -> list[FoundPlugin]:
    """Call every loaded provider and turn its entries into plugins; failures become error entries.

    A provider that fails to import, raises, or returns something other than a mapping becomes
    one entry named after its entry point, with the reason.
    """
    plugins: list[FoundPlugin] = []
    for provider in found:
        if provider.error:
            plugins.append(provider)
            continue
        try:
            entries = provider.plugin()
        except Exception as exc:
            plugins.append(FoundPlugin(provider.name, provider.source,
                                       error=f"provider raised {describe_exception(exc)}"))
            continue
        if not isinstance(entries, Mapping):
            plugins.append(FoundPlugin(provider.name, provider.source,
                                       error=f"provider returned {type(entries).__name__}, not a mapping"))
            continue
        for name, entry in entries.items():
            plugins.append(_as_found(str(name), entry, provider.source))
    return plugins


def _as_found(name: str, entry: Any, provider_source: str) -> FoundPlugin:
    if not isinstance(entry, Provided):
        entry = Provided(entry)
    source = f"{entry.source} via {provider_source}" if entry.source else provider_source
    if entry.error:
        return FoundPlugin(name, source, error=entry.error)
    return FoundPlugin(name, source, _Made(entry.plugin))
