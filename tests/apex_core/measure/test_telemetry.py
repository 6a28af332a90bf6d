"""NVML readings, throttle flags and energy per call, against a fake pynvml (no GPU here)."""

import sys
import types

import pytest

from apex_core.measure import telemetry
from apex_core.results import Telemetry


class FakeNvml(types.SimpleNamespace):
    """What the calls return is set per test; a missing quantity raises, as NVML does."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    def __init__(self, energy=True, power=True, throttle=0x0):
        super().__init__()
        self.energy_mj = 1000.0
        self.has_energy, self.has_power, self.throttle = energy, power, throttle

    def nvmlInit(self):
        pass

    def nvmlDeviceGetClockInfo(self, handle, which):
        return 1980 if which == self.NVML_CLOCK_SM else 2619

    def nvmlDeviceGetTemperature(self, handle, sensor):
        return 41

    def nvmlDeviceGetPowerUsage(self, handle):
        if not self.has_power:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return 250_000  # mW

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return self.throttle

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        if not self.has_energy:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        self.energy_mj += 5.0  # 5 mJ between two reads
        return self.energy_mj


@pytest.fixture
def fake_nvml(monkeypatch):
    def install(**kwargs):
        fake = FakeNvml(**kwargs)
        monkeypatch.setitem(sys.modules, "pynvml", fake)
        monkeypatch.setattr(telemetry, "device_handle", lambda nvml, index: "handle")
        return fake

    return install


def run(monitor, calls=None):
    calls = calls if calls is not None else []
    return telemetry.measure_telemetry(monitor, lambda: "timed", lambda: calls.append(1), lambda: None)


def test_clocks_power_and_energy_per_call_from_the_counter(fake_nvml):
    fake_nvml()
    calls = []
    result, found = run(telemetry.Monitor(interval_s=0.001), calls)
    assert result == "timed" and found.unavailable == "" and found.readings >= 1
    assert found.sm_clock_mhz == (1980, 1980, 1980) and found.power_w == (250, 250, 250)
    assert found.throttled_share == 0 and not found.throttled
    assert found.energy_method == "nvml_total_energy"
    assert found.energy_calls == len(calls) and found.energy_j_per_call == pytest.approx(0.005 / len(calls))
    assert found.average_w == pytest.approx(0.005 / found.energy_window_s)


def test_without_the_energy_counter_power_times_time_is_used_and_named(fake_nvml):
    fake_nvml(energy=False)
    _, found = run(telemetry.Monitor(interval_s=0.001))
    assert found.energy_method == "nvml_power_x_time"
    assert found.average_w == pytest.approx(250)


def test_without_counter_or_power_energy_is_unavailable_with_the_reason(fake_nvml):
    fake_nvml(energy=False, power=False)
    _, found = run(telemetry.Monitor(interval_s=0.001))
    assert found.energy_j_per_call is None
    assert "neither the energy counter nor the power" in found.energy_unavailable
    assert found.power_w is None and found.sm_clock_mhz is not None


def test_a_power_cap_marks_the_cell_throttled(fake_nvml):
    fake_nvml(throttle=0x4 | 0x1)  # sw power cap while the GPU also reports idle moments
    _, found = run(telemetry.Monitor(interval_s=0.001))
    assert found.throttled and found.throttled_share == 1.0 and found.throttle_reasons == ("sw_power_cap",)


def test_idle_and_clock_settings_are_not_throttling():
    assert telemetry.throttle_names(0x1 | 0x2 | 0x100) == []
    assert telemetry.throttle_names(0x40 | 0x8) == ["hw_slowdown", "hw_thermal_slowdown"]


def test_without_nvidia_ml_py_every_field_says_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    result, found = run(telemetry.Monitor())
    assert result == "timed"
    assert found == Telemetry(unavailable="nvidia-ml-py not installed (pip install 'apex-bench[nvml]')")
    assert found.energy_j_per_call is None and found.sm_clock_mhz is None


def test_a_device_nvml_cannot_see_is_unavailable(monkeypatch, fake_nvml):
    fake_nvml()

    def no_handle(nvml, index):
        raise RuntimeError("NVML_ERROR_NOT_FOUND")

    monkeypatch.setattr(telemetry, "device_handle", no_handle)
    _, found = run(telemetry.Monitor())
    assert "NVML has no handle" in found.unavailable and found.readings == 0


class HandleNvml:
    """NVML's three ways to a card's handle; ``missing`` names the calls the binding lacks or that fail."""

    def __init__(self, missing=()):
        self.missing = missing

    def _call(self, name, result):
        if name in self.missing:
            raise RuntimeError(f"{name}: NVML_ERROR_NOT_FOUND")
        return result

    def nvmlDeviceGetHandleByUUID(self, uuid):
        return self._call("uuid", f"by uuid {uuid}")

    def nvmlDeviceGetHandleByPciBusId_v2(self, bus):
        return self._call("bus_v2", f"by bus {bus}")

    def nvmlDeviceGetHandleByPciBusId(self, bus):
        return self._call("bus", f"by bus {bus} (v1)")

    def nvmlDeviceGetHandleByIndex(self, index):
        return f"by index {index}"


def test_the_handle_follows_the_cards_uuid_not_nvmls_index(monkeypatch):
    # under CUDA_VISIBLE_DEVICES=2 torch's device 0 is the host's third card: NVML's index 0 is another
    props = types.SimpleNamespace(uuid="4323ee18-9bdf", pci_domain_id=0, pci_bus_id=0x1B, pci_device_id=0)
    monkeypatch.setattr(telemetry.torch.cuda, "get_device_properties", lambda index: props)
    assert telemetry.device_handle(HandleNvml(), 0) == "by uuid GPU-4323ee18-9bdf"
    assert telemetry.device_handle(HandleNvml(missing=("uuid",)), 0) == "by bus 00000000:1b:00.0"
    assert telemetry.device_handle(HandleNvml(missing=("uuid", "bus_v2")), 0) == "by bus 00000000:1b:00.0 (v1)"
    assert telemetry.device_handle(HandleNvml(missing=("uuid", "bus_v2", "bus")), 0) == "by index 0"
