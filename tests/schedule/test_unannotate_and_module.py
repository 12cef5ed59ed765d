"""unannotate (sched/schedule/annotations.py) and what a TVM user asks of a schedule besides
its steps (sched/schedule/introspection.py): mod, work_on, show, fork_seed,
get_output_blocks."""

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import ScheduleError
from sched.hand_schedules.gpu import gpu_matmul
from sched.schedule.trace import Trace


def scale_then_shift():
    A = te.placeholder((8, 16), "float32", name="A")
    B = te.compute((8, 16), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((8, 16), lambda i, j: B[i, j] + 1.0, name="C")
    return te.create_prim_func([A, C])


def run(func):
    a = np.random.default_rng(0).random((8, 16), dtype=np.float32)
    c = np.zeros((8, 16), np.float32)
    sched.build(func, target="c")(a, c)
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)


def test_unannotate_removes_the_key_of_a_loop_and_of_a_block():
    func = scale_then_shift()
    sch = sched.Schedule(func)
    block = sch.get_block("B")
    i, j = sch.get_loops(block)
    sch.annotate(i, "pragma_auto_unroll_max_step", 16)
    sch.annotate(block_or_loop=block, ann_key="meta_schedule.cooperative_fetch", ann_val=4)
    sch.unannotate(block_or_loop=i, ann_key="pragma_auto_unroll_max_step")
    sch.unannotate(block, "meta_schedule.cooperative_fetch")
    sch.unannotate(block, "never_set")                    # as in TVM: nothing to remove
    assert sch.func == sched.Schedule(func).func
    assert "sch.unannotate(l1, 'pragma_auto_unroll_max_step')" in str(sch.trace)
    assert sch.trace.apply(func).func == sch.func
    assert Trace.from_json(sch.trace.to_json()).apply(func).func == sch.func
    run(sch.func)


def test_unannotate_checks_the_pipeline_annotations_that_remain():
    sch = gpu_matmul(64, 64, 64, block_tile=(32, 32))
    k_outer = sch.get_loops(sch.get_block("C_update"))[4]
    sch.annotate(k_outer, "software_pipeline_stage", [0, 0, 1])
    sch.annotate(k_outer, "software_pipeline_order", [0, 1, 2])
    sch.annotate(k_outer, "software_pipeline_async_stages", [0])
    # the async stages say which stages copy asynchronously: left without the stages, the
    # build refused the function (audit helper-127)
    with pytest.raises(ScheduleError, match="unannotate: loop 'k_0' keeps "
                                            "'software_pipeline_async_stages'.*unannotate "
                                            "'software_pipeline_async_stages' first"):
        sch.unannotate(k_outer, "software_pipeline_stage")
    sch.unannotate(k_outer, "software_pipeline_async_stages")
    assert "software_pipeline_async_stages" not in sch.func.script()
    sch.unannotate(k_outer, "software_pipeline_stage")
    sch.unannotate(k_outer, "software_pipeline_order")
    assert "software_pipeline" not in sch.func.script()


def test_unannotate_refuses_a_key_that_is_no_string():
    sch = sched.Schedule(scale_then_shift())
    with pytest.raises(ScheduleError, match=r"argument 2, 'ann_key' to unannotate: expected a "
                                            r"non-empty string, got 3"):
        sch.unannotate(sch.get_block("B"), 3)


def test_mod_holds_the_function_as_main():
    sch = sched.Schedule(scale_then_shift())
    sch.compute_inline(sch.get_block("B"))
    assert sch.mod["main"].body is sch.func.body and sch.mod["main"].name == "main"
    assert list(sch.mod) == ["main"] and len(sch.mod) == 1
    assert sched.parse(sch.mod.script()) == sch.mod      # the @I.ir_module form, read back
    with pytest.raises(KeyError, match=r"the module has no function 'other'"):
        sch.mod["other"]
    sch.work_on("main")
    with pytest.raises(ScheduleError, match=r"work_on: argument 'func_name': this schedule "
                                            r"holds one function"):
        sch.work_on("other")



def test_a_schedule_of_a_module_keeps_its_other_functions():
    # sch.mod held "main" alone: a round trip of the module lost its other functions, which
    # TVM's sch.mod keeps (audit helper-162)
    from sched.ir.module import IRModule

    helper = te.create_prim_func([te.placeholder((4,), "float32", name="X"),
                                  te.compute((4,), lambda i: te.const(1.0), name="Y")])
    module = IRModule({"fill": helper, "main": scale_then_shift()})
    sch = sched.Schedule(module)
    sch.compute_inline(sch.get_block("B"))
    assert list(sch.mod) == ["fill", "main"] and list(sch.copy().mod) == ["fill", "main"]
    assert sch.mod["fill"] == module["fill"] and sch.mod["main"].body is sch.func.body
    assert sched.parse(sch.mod.script()) == sch.mod
    run(sch.mod["main"])

def test_show_prints_the_function_then_the_trace(capsys):
    sch = sched.Schedule(scale_then_shift())
    sch.compute_inline(sch.get_block("B"))
    sch.show(black_format=False)
    printed = capsys.readouterr().out
    assert printed.index("@T.prim_func") < printed.index("sch.compute_inline(b0)")


def test_fork_seed_is_reproducible_and_not_recorded():
    seeds = [sched.Schedule(scale_then_shift(), seed=3).fork_seed() for _ in range(2)]
    assert seeds[0] == seeds[1] and isinstance(seeds[0], int)
    sch = sched.Schedule(scale_then_shift(), seed=3)
    sch.fork_seed()
    assert len(sch.trace) == 0


def test_get_output_blocks_are_the_writers_of_parameters():
    func = scale_then_shift()
    sch = sched.Schedule(func)
    outputs = sch.get_output_blocks(sch.get_block("root"))
    assert [b.name for b in outputs] == ["C"]
    sch.cache_write(outputs[0], 0, "local")      # C writes C_local, C_local's copy writes C
    outputs = sch.get_output_blocks("root")
    assert [b.name for b in outputs] == ["C_local"]
    sch.compute_inline(sch.get_block("B"))
    assert "= sch.get_output_blocks('root')" in str(sch.trace)
    assert sch.trace.apply(func).func == sch.func
    run(sch.func)
