"""The card's fingerprint: NVML's static facts beside the figures a run measures."""

from __future__ import annotations

from apex_core.measure.device_fingerprint import fingerprint, fingerprint_of, nvml_identity


class FakeNvml:
    """The NVML calls the fingerprint makes, with an H100's answers; ``missing`` raise."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2

    def __init__(self, missing: tuple[str, ...] = ()) -> None:
        self.missing = missing

    def __getattr__(self, name: str):
        answers = {
            "nvmlDeviceGetName": b"NVIDIA H100 80GB HBM3", "nvmlDeviceGetUUID": "GPU-1234",
            "nvmlSystemGetDriverVersion": "580.82.07", "nvmlDeviceGetVbiosVersion": "96.00.99.00.01",
            "nvmlDeviceGetEnforcedPowerLimit": 700_000, "nvmlDeviceGetPowerManagementDefaultLimit": 700_000,
            "nvmlDeviceGetEccMode": (1, 1), "nvmlDeviceGetCurrPcieLinkGeneration": 5,
            "nvmlDeviceGetCurrPcieLinkWidth": 16, "nvmlDeviceGetMaxPcieLinkGeneration": 5,
            "nvmlDeviceGetMaxPcieLinkWidth": 16,
        }
        if name in self.missing:
            def raises(*_args):
                raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
            return raises
        if name == "nvmlDeviceGetMaxClockInfo":
            return lambda _handle, clock: {1: 1980, 2: 2619}[clock]
        if name in answers:
            return lambda *_args: answers[name]
        raise AttributeError(name)


def test_identity_reads_each_static_fact_and_decodes_bytes():
    identity = nvml_identity(FakeNvml(), handle=object())
    assert identity == {
        "gpu": "NVIDIA H100 80GB HBM3", "uuid": "GPU-1234", "driver": "580.82.07", "vbios": "96.00.99.00.01",
        "power_limit_w": 700.0, "power_limit_default_w": 700.0, "ecc": True,
        "sm_clock_max_mhz": 1980, "mem_clock_max_mhz": 2619, "pcie": "gen5 x16 (max gen5 x16)",
    }


def test_a_fact_the_driver_does_not_report_is_none_and_the_others_still_come():
    identity = nvml_identity(FakeNvml(missing=("nvmlDeviceGetEccMode", "nvmlDeviceGetCurrPcieLinkWidth")),
                             handle=object())
    assert identity["ecc"] is None and identity["pcie"] is None
    assert identity["power_limit_w"] == 700.0


def test_fingerprint_takes_the_measured_copy_and_the_spin_clock_not_nvml_reading():
    facts = {"copy_gbps": 2866.0, "identity": {"gpu": "H100", "ecc": True},
             "clock": {"spin_cycles_per_us": 1755.0, "nvml_sm_clock_mhz": 1980.0}}
    assert fingerprint(facts) == {"gpu": "H100", "ecc": True, "copy_gbps": 2866.0,
                                  "sm_clock_under_load_mhz": 1755.0}


def test_the_fingerprint_takes_the_best_copy_where_the_run_kept_it():
    facts = {"copy_gbps": 2866.0, "copy_best_gbps": 2940.0}
    assert fingerprint(facts)["copy_gbps"] == 2940.0


def test_fingerprint_of_a_report_prefers_the_stored_one_and_rebuilds_older_ones():
    stored = {"environment": {"device_facts": {"copy_gbps": 1.0, "fingerprint": {"copy_gbps": 2.0}}}}
    assert fingerprint_of(stored) == {"copy_gbps": 2.0}
    older = {"environment": {"device_facts": {"copy_gbps": 2866.0}}}
    assert fingerprint_of(older) == {"copy_gbps": 2866.0, "sm_clock_under_load_mhz": None}
    cpu = {"environment": {"device_facts": {"cuda_unavailable": "no CUDA device"}}}
    assert fingerprint_of(cpu) is None and fingerprint_of({}) is None
