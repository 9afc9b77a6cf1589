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
def _numba_kernels_for_small_data(request):
    """Small blocks normally go through the NumPy twin (no numba start-up); the tests run the
    numba kernels on their small arrays, except where they compare the twin itself."""
    from fastfinite import summary

    if request.node.get_closest_marker("numpy_twin"):
        yield
        return
    saved = summary.SMALL_BLOCK
    summary.SMALL_BLOCK = 0
    try:
        yield
    finally:
        summary.SMALL_BLOCK = saved
