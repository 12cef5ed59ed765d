"""Shared test helpers: seeded random inputs and numpy comparison."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


def assert_close(actual, expected, rtol: float = 1e-4, atol: float = 1e-5) -> None:
    np.testing.assert_allclose(np.asarray(actual, dtype=np.float64),
                               np.asarray(expected, dtype=np.float64), rtol=rtol, atol=atol)
