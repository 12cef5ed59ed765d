"""lower: the passes in order, logged when they change the IR, verified on entry and exit."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from sched.ir import BlockRealize, Buffer, BufferStore, IntImm, collect, const
from sched.ir.verify import VerifyError
from sched.lower import lower
from sched.lower import pipeline as pipeline_module
from tests.lower.block_ir import add_2d, matmul


def test_lowered_matmul_has_no_blocks_and_flat_accesses():
    lowered = lower(matmul())
    assert not collect(lowered.body, BlockRealize)
    assert all(len(store.indices) == 1 for store in collect(lowered.body, BufferStore))
    assert lowered.params == matmul().params


def test_log_shows_ir_only_after_passes_that_changed_it(caplog):
    with caplog.at_level(logging.DEBUG, logger="sched.lower"):
        lower(add_2d())
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("lower_reduction_init:") and "(no change)" in m for m in messages)
    assert not any(m.startswith("after lower_reduction_init") for m in messages)
    assert any(m.startswith("after convert_blocks_to_loops") for m in messages)
    assert any(m.startswith("after flatten_buffers") for m in messages)


def test_invalid_input_is_reported_before_any_pass():
    func = add_2d()
    stray = BufferStore(Buffer("Z", (IntImm(1),)), const(0.0, "float32"), (IntImm(0),))
    with pytest.raises(VerifyError, match="the input of lower"):
        lower(dataclasses.replace(func, body=stray))


def test_debug_mode_names_the_pass_that_broke_the_ir(monkeypatch):
    stray = BufferStore(Buffer("Z", (IntImm(1),)), const(0.0, "float32"), (IntImm(0),))

    def flatten_buffers(func):
        return dataclasses.replace(func, body=stray)

    monkeypatch.setattr(pipeline_module, "flatten_buffers", flatten_buffers)
    with pytest.raises(VerifyError, match="the output of flatten_buffers"):
        lower(add_2d(), debug=True)
    with pytest.raises(VerifyError, match="the output of lower"):
        lower(add_2d())
