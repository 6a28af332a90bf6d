"""``--list`` shows what plugins say as plain text, brackets and all."""

from __future__ import annotations

import io

from rich.console import Console

from apex_core.backend_options import BackendOption
from apex_core.cli.listing import print_listing, print_options
from apex_core.registry import Registry
from apex_core.results import PluginRow
from tests.apex_core.fakes import Axpy, Eager


def test_bracketed_text_is_shown_not_taken_for_markup():
    reason = "jax not installed (pip install 'apex-bench[jax]'; for CUDA: pip install 'jax[cuda12]')"
    out = io.StringIO()
    print_listing([PluginRow("backend", "jax", "adapters.jax_backend:JaxBackend", "unavailable", reason,
                             "[bold]not bold[/bold]")], "cpu", Console(file=out, width=300))
    text = out.getvalue()
    assert "pip install 'apex-bench[jax]'" in text and "'jax[cuda12]'" in text
    assert "[bold]not bold[/bold]" in text


def test_an_options_help_keeps_its_brackets():
    class WithOption(Eager):
        name = "with-option"
        option_specs = (BackendOption("mode", "str", "one of [fast, safe]"),)

    out = io.StringIO()
    print_options(Registry.from_objects([WithOption()], [Axpy()]), Console(file=out, width=300))
    assert "one of [fast, safe]" in out.getvalue()
