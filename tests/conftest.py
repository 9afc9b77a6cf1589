import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "default",
    deadline=None,
    max_examples=int(os.environ.get("FASTFINITE_EXAMPLES", "150")),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("default")


def pytest_configure(config):
    config.addinivalue_line("markers", "numpy_twin: run small blocks through the NumPy twin")


@pytest.fixture(autouse=True)
def _numba_kernels_for_small_data(request, monkeypatch):
    """Small blocks normally go through the NumPy twin (no numba start-up); the tests run the
    numba kernels on their small arrays (``FASTFINITE_NUMPY_TWIN_MAX=0``, the documented
    switch), except where they compare the twin itself."""
    if request.node.get_closest_marker("numpy_twin"):
        monkeypatch.delenv("FASTFINITE_NUMPY_TWIN_MAX", raising=False)
    else:
        monkeypatch.setenv("FASTFINITE_NUMPY_TWIN_MAX", "0")
