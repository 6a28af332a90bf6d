"""The report at a glance: the summary after the header, words that fit the device, captions that say
only what is drawn, and the --peak-tflops hint naming the command that takes it."""

from __future__ import annotations

import copy
import re
from typing import Any

from apex_core.report.html import ReportInputs, RunInput, render_html
from apex_core.report.records import report_record
from tests.apex_core.history.conftest import make_report, ok_cell, skipped_cell
from tests.apex_core.report.html.sources import Evaluator, check_numbers
from tests.golden import records

GPU_WORDS = ("card", "L2", "CUDA", "GPU", "NVML", "SM clock", "event", "driver", "launch-bound", "diamond")


def page(record: dict[str, Any], peak_tflops: float | None = None) -> str:
    return render_html(ReportInputs(runs=(RunInput("run0", "run.json", record),), peak_tflops=peak_tflops))


def section(html: str, anchor: str) -> str:
    """The text of one section (tags, scripts and plots left out), its words separated by single spaces."""
    start = html.index(f'id="{anchor}"')
    end = html.index("</section>", start)
    body = re.sub(r"<svg.*?</svg>", " ", html[start:end], flags=re.S)
    return " ".join(re.sub(r"<[^>]+>", " ", body.replace("&#x27;", "'")).split())


def visible_text(html: str) -> str:
    body = html[html.index("<body>"):]
    body = re.sub(r"<script>.*?</script>", " ", body, flags=re.S)
    return " ".join(re.sub(r"<[^>]+>", " ", body.replace("&#x27;", "'")).split())


def gpu_record() -> dict[str, Any]:
    """The golden run: two cases on an H100, a cell of each failing status, a cell flagged no device
    work and faster than physics (the fastest p50 of its case, 0 ms)."""
    return report_record(records.report())


def cpu_record() -> dict[str, Any]:
    cells = [ok_cell("tilepack", "torch-reference", 0.2), ok_cell("tilepack", "triton", 0.1),
             skipped_cell("tilepack", "onnxruntime")]
    cells[1]["flags"] = ["noisy"]
    cells[2]["reason"] = "onnxruntime is not installed"  # the fixture's reason speaks of CUDA
    for cell in cells[:2]:
        cell.update(cache="n/a", bytes_moved=2_000_000)  # 2 MB: the cells' 2 / p50 GB/s
    record = make_report(cells)
    record["config"]["timing"].update(timer="event", cache="cold")  # what a CPU run records
    return record


def test_the_summary_follows_the_header_and_names_the_fastest_trusted_backend_per_case() -> None:
    record = gpu_record()
    html = page(record)
    assert html.index("</header>") < html.index('id="summary"') < html.index('id="cases"')
    assert '<a href="#summary">summary</a>' in html
    text = section(html, "summary")
    # gather: golden-fast is 8x faster than torch-reference
    assert "golden-gather / default fp16 golden-fast 0.0061 ms 8.262 x" in text
    # scan: golden-fast has the lowest p50 (0 ms) but no device work and faster than physics: not counted
    assert "golden-scan / default fp16 torch-reference 1.214 ms torch-reference itself launch-bound" in text
    names = [c["name"] for c in record["benchmarks"]]
    fast = names.index("golden-gather/default/golden-fast/fp16/cuda")
    reference = names.index("golden-gather/default/torch-reference/fp16/cuda")
    summary_html = html[html.index('id="summary"'):html.index('id="cases"')]
    assert f'data-src="div(run0#/benchmarks/{reference}/stats/p50_ms,run0#/benchmarks/{fast}/stats/p50_ms)"' \
        in summary_html
    anchor = re.search(r'id="(case-golden-gather[^"]*)"', html)
    assert anchor is not None and f'<a href="#{anchor[1]}">golden-gather / default</a>' in summary_html
    check_numbers(html, Evaluator({"run0": record}))


def test_the_summary_lists_failures_by_backend_and_case_and_counts_each_flag() -> None:
    html = page(gpu_record())
    text = section(html, "summary")
    assert "Failures: 3 cells (1 cell skipped). cells without a time gives each reason." in text
    assert "incorrect : golden-slow on golden-scan/default (fp16)" in text
    assert "suspect : golden-broken on golden-scan/default (fp16)" in text
    assert "error : golden-broken on golden-gather/default (fp16)" in text
    summary_html = html[html.index('id="summary"'):html.index('id="cases"')]
    assert '<a href="#not-timed">' in summary_html and 'id="not-timed"' in html
    assert "launch-bound: 4 cells" in text and "noisy: 2 cells" in text
    assert "faster than physics: 1 cell" in text and "no device work: 1 cell" in text


def test_a_case_without_a_trusted_time_and_a_clean_run_say_so() -> None:
    record = gpu_record()
    for cell in record["benchmarks"]:
        if cell["workload"] == "golden-gather" and cell["status"] == "ok":
            cell["flags"] = ["no_device_work"]
    text = section(page(record), "summary")
    expected = "golden-gather / default fp16 every timed cell is flagged no device work or faster than physics"
    assert expected in text
    clean = make_report([ok_cell("tilepack", "torch-reference", 0.2), ok_cell("tilepack", "triton", 0.1)])
    text = section(page(clean), "summary")
    assert "tilepack / default fp32 triton" in text and "2 x" in text
    assert "Failures: none." in text and "Flags: none." in text


def test_a_cpu_run_gets_no_gpu_words() -> None:
    record = cpu_record()
    html = page(record)
    check_numbers(html, Evaluator({"run0": record}))  # the CPU's cores among them
    text = visible_text(html)
    for word in GPU_WORDS:
        assert word not in text, word
    header = html[html.index("<header"):html.index("</header>")]
    assert "<th>CPU</th><td>Test CPU" in header and "cpu_perf_counter" in header and "perf_counter" in text
    assert 'data-src="run0#/environment/cpu_count">2</span> cores' in header
    assert "this run measured no copy bandwidth (a CPU run)" in text
    assert "dashed" not in text  # no physics floor drawn, none spoken of


def test_a_gpu_run_names_its_card_timer_and_cold_l2() -> None:
    text = visible_text(page(gpu_record()))
    assert "card NVIDIA H100 80GB HBM3" in text
    assert "cuda_event_held (CUDA events around each call, stream held)" in text
    assert "cold L2 (flushed before each sample)" in text
    warm = gpu_record()
    for cell in warm["benchmarks"]:
        if cell.get("cache") == "cold":
            cell["cache"] = "warm"
    text = visible_text(page(warm))
    assert "warm L2 (not flushed)" in text and "cold L2" not in text


def test_a_cold_flush_that_could_not_reset_persisting_lines_says_so() -> None:
    assert "evict_last" not in visible_text(page(gpu_record()))  # a record from before the reset
    record = gpu_record()
    record["environment"]["l2_flush"] = "persisting lines reset, then 2x L2 written"
    assert "evict_last" not in visible_text(page(record))
    record["environment"]["l2_flush"] = ("2x L2 written (persisting L2 lines not reset: "
                                         "cuCtxResetPersistingL2Cache returned CUresult 801)")
    text = visible_text(page(record))
    assert "CUresult 801" in text and "kernels that load with evict_last may have kept their data in L2" in text


def test_the_dashed_floor_is_spoken_of_only_where_it_is_drawn() -> None:
    record = gpu_record()
    html = page(record)
    caption = section(html, "cases")
    assert html.count('class="floor"') == 2  # one per case
    assert "the dashed line is the physics floor: the case's minimal bytes at the memory's peak bandwidth" \
        in caption
    assert "the diamond is the host's time to issue one call" in caption
    copy_only = copy.deepcopy(record)
    del copy_only["environment"]["device_facts"]["dram_peak_gbps"]
    assert "at 1.25x the copy bandwidth the run measured" in section(page(copy_only), "cases")
    bare = copy.deepcopy(record)
    del bare["environment"]["device_facts"]
    html = page(bare)
    assert 'class="floor"' not in html and "dashed" not in section(html, "cases")
    assert "A bar past the line" not in section(html, "roofline")
    assert "this run measured no copy bandwidth." in section(html, "roofline")


def test_the_compute_roof_hint_names_the_report_command(h100_events: dict[str, Any]) -> None:
    text = section(page(h100_events), "roofline")
    assert "apex-bench report RUN.json --peak-tflops X draws it" in text
    assert "(give --peak-tflops)" not in text
    with_peak = page(h100_events, peak_tflops=989.0)
    assert "The compute roof is 989 TFLOP/s" in section(with_peak, "roofline")
    assert "--peak-tflops X" not in section(with_peak, "roofline")


def test_the_card_fingerprint_is_shown_where_the_run_recorded_one() -> None:
    assert "card fingerprint" not in visible_text(page(gpu_record()))  # recorded before fingerprints
    record = gpu_record()
    record["environment"].setdefault("device_facts", {})["fingerprint"] = {
        "sm_clock_under_load_mhz": 1755.0, "power_limit_w": 700.0, "ecc": True,
        "pcie": "gen5 x16 (max gen5 x16)", "vbios": "96.00.99.00.01", "copy_gbps": 2866.0}
    html = page(record)
    text = visible_text(html)
    assert ("card fingerprint SM clock under load 1755 MHz, power limit 700 W, ECC on, "
            "PCIe gen5 x16 (max gen5 x16), VBIOS 96.00.99.00.01") in text
    check_numbers(html, Evaluator({"run0": record}))
