"""Configured commands: the config file's [external.NAME] tables and APEX_BENCH_EXT_<NAME>_CMD variables."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.external.config import ConfigEntryError, from_config, from_environment, name_from_variable
from adapters.external.provider import external_backends
from apex_core.config_file import CONFIG_ENV
from apex_core.providers import Provided
from apex_core.registry import Registry


def test_variable_names_become_backend_names():
    assert name_from_variable("APEX_BENCH_EXT_MY_TVM_CMD") == "my-tvm"
    assert name_from_variable("APEX_BENCH_EXT__CMD") is None
    assert name_from_variable("TVM_BENCH_CMD") is None


def test_variable_commands_are_split_like_a_shell_but_never_run_by_one():
    commands = from_environment({"APEX_BENCH_EXT_TVM_CMD": "tvm-bench --target 'cuda -arch=sm_90' ; rm -rf /"})
    assert commands["tvm"].argv == ("tvm-bench", "--target", "cuda -arch=sm_90", ";", "rm", "-rf", "/")
    assert isinstance(from_environment({"APEX_BENCH_EXT_X_CMD": "  "})["x"], ConfigEntryError)
    assert "cannot split" in str(from_environment({"APEX_BENCH_EXT_X_CMD": "tool 'open"})["x"])


def test_file_entries_resolve_against_the_files_folder(tmp_path: Path):
    path = tmp_path / "apex-bench.toml"
    commands = from_config({"xla": {"command": ["./run.sh", "--fast"], "workloads": ["tilepack"],
                                    "dtypes": ["fp16"], "env": {"XLA_FLAGS": "--x"}}}, path)
    xla = commands["xla"]
    assert xla.argv == ("./run.sh", "--fast") and xla.cwd == str(tmp_path.resolve())
    assert xla.workloads == ("tilepack",) and xla.dtypes == ("fp16",) and xla.env == (("XLA_FLAGS", "--x"),)


@pytest.mark.parametrize(("table", "message"), [
    ({"command": ["x"], "comand": 1}, "unknown key 'comand'; valid keys: command, description"),
    ({"description": "no command"}, "'command' is missing"),
    ({"command": 7}, "'command' must be a list of strings or one string"),
    ({"command": []}, "'command' is empty"),
    ({"command": ["x"], "dtypes": ["bf16"]}, "'dtypes': 'bf16' is not one of fp32, fp16"),
    ({"command": ["x"], "devices": "cpu"}, "'devices' must be a list of names"),
    ({"command": ["x"], "env": {"A": 1}}, "'env' must be a table of strings"),
])
def test_a_bad_entry_names_the_file_and_the_field(tmp_path: Path, table, message):
    path = tmp_path / "apex-bench.toml"
    entry = from_config({"tool": table}, path)["tool"]
    assert isinstance(entry, ConfigEntryError)
    assert str(entry).startswith(f"{path}: [external.tool]") and message in str(entry)


def test_bad_entries_become_error_rows_and_good_ones_load(tmp_path: Path, monkeypatch):
    config = tmp_path / "apex-bench.toml"
    config.write_text('[external.good]\ncommand = ["good-tool"]\n\n'
                      '[external.bad]\ncommand = ["x"]\nshell = true\n'
                      '\n[external.twice]\ncommand = ["a"]\n')
    monkeypatch.setenv(CONFIG_ENV, str(config))
    monkeypatch.setenv("APEX_BENCH_EXT_TWICE_CMD", "b")
    entries = external_backends()
    assert entries["ext:good"].plugin.command.argv == ("good-tool",)
    assert isinstance(entries["ext:bad"], Provided) and "unknown key 'shell'" in entries["ext:bad"].error
    assert "defined twice" in entries["ext:twice"].error
    assert "APEX_BENCH_EXT_TWICE_CMD" in entries["ext:twice"].error
    registry = Registry.discover()
    assert "ext:good" in registry.backends
    rows = {row.name: row for row in registry.broken}
    assert rows["ext:bad"].status == "error" and str(config) in rows["ext:bad"].reason
    assert {"ext:bad", "ext:twice"} <= set(registry.backend_names())


def test_an_unreadable_config_file_is_one_error_row_for_the_provider(tmp_path: Path, monkeypatch):
    config = tmp_path / "apex-bench.toml"
    config.write_text("external = [1, 2\n")
    monkeypatch.setenv(CONFIG_ENV, str(config))
    row = {row.name: row for row in Registry.discover().broken}["external"]
    assert "invalid TOML" in row.reason and str(config) in row.reason


def test_plain_top_level_keys_must_be_known_but_tables_belong_to_providers(tmp_path: Path):
    from apex_core.config_file import read_config
    from apex_core.errors import UsageError

    config = tmp_path / "apex-bench.toml"
    config.write_text('discover = ["k"]\n[other_provider.x]\nsetting = 1\n')
    assert read_config(config)["other_provider"] == {"x": {"setting": 1}}
    config.write_text('discovr = ["k"]\n')
    with pytest.raises(UsageError, match=r"apex-bench.toml: unknown key 'discovr'; the top level holds"):
        read_config(config)
