"""Library tests compile thousands of small programs: they use the numpy backend unless a test
asks for one (`backend=...`), since numba spends ~0.1 s compiling each new loop kernel. The
numba backend is tested where it is named: tests/test_kernels.py and the differential net
(tests/test_differential.py) run on both backends. Notebooks (nbval) keep the real default."""
import pytest


@pytest.fixture(autouse=True)
def _numpy_backend_by_default(monkeypatch):
    monkeypatch.setenv('MINIGRAD_BACKEND', 'numpy')
