"""sched.build: targets."""

from __future__ import annotations

import pytest

import sched
from tests.lower.block_ir import add_2d


def test_cuda_target_is_not_built_yet():
    with pytest.raises(NotImplementedError, match="CUDA target is not built yet"):
        sched.build(add_2d(), target="cuda")


def test_unknown_target_lists_the_valid_ones():
    with pytest.raises(ValueError, match=r"unknown target 'llvm': expected one of 'c', 'cuda'"):
        sched.build(add_2d(), target="llvm")


def test_build_takes_a_prim_func():
    with pytest.raises(TypeError, match="expected a PrimFunc"):
        sched.build("not a function")
