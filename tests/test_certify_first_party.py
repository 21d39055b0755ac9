"""Every first-party plugin that is available here is certified by the conformance suite (CI)."""
import pytest
from needs import require

from acelera.conformance.suite import certify
from acelera.registrar.registry import get_registry

FIRST_PARTY = ["xnnpack-cpu", "gpu-opencl", "gpu-gl", "nnapi", "hexagon", "coreml"]


@pytest.mark.slow
@pytest.mark.parametrize("name", FIRST_PARTY)
def test_first_party_plugin_certifies(name, models_dir):
    reg = get_registry()
    avail = reg.availability(name)
    require(avail.ok, f"{name} is unavailable here: {avail.reason}")
    cert = certify(reg, name, models_dir=models_dir)
    d = cert.to_dict()
    failed = [c["id"] for c in d["cases"] if c["status"] == "fail"]
    assert d["verdict"] == "PASS", f"{name}: failing cases {failed[:10]}"
