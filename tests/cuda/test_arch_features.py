"""What a kernel needs of its arch, checked before compiling (sched/cuda/arch_features.py): a
feature the arch lacks is named with the step that brought it; an arch NVRTC does not compile
for is named with those it does. No GPU needed."""

import pytest

import sched
from sched import hand_schedules
from sched.cuda.arch_features import ArchFeatureError, check_arch_features
from sched.errors import BuildError


def test_cp_async_for_an_arch_before_sm_80_names_the_annotation():
    sch = hand_schedules.gpu_matmul_pipelined(128, 128, 64, stages=3)
    with pytest.raises(ArchFeatureError, match=r"(?s)asynchronous copies \(cp\.async\) need "
                                               r"sm_80 or newer, the kernel is built for sm_75"
                                               r".*>\s+\d+ \|\s+asm volatile\(\"cp\.async"
                                               r".*the steps that brought what the arch lacks:"
                                               r"\n    step \d+ of \d+: sch\.annotate\(.*"
                                               r"'software_pipeline_async_stages'") as caught:
        sched.build(sch, target="cuda", arch="sm_75")
    assert "the schedule that made this kernel" not in str(caught.value)   # the step, not all
    sched.build(sch, target="cuda", arch="sm_80")


def test_mma_sync_for_sm_75_is_refused_but_its_ldmatrix_is_not():
    func = hand_schedules.gpu_matmul_mma(64, 64, 32).func
    with pytest.raises(ArchFeatureError, match=r"mma\.sync m16n8k16 \(tensor cores\) need "
                                               r"sm_80") as caught:
        sched.build(func, target="cuda", arch="sm_75")
    assert "ldmatrix need" not in str(caught.value)


def test_a_feature_named_only_in_a_comment_needs_nothing():
    check_arch_features("// asynchronous copy (cp.async): lands by the wait_group\n", "sm_75")
    with pytest.raises(ArchFeatureError, match=r"kernel\.cu\(2\): error: asynchronous copies"):
        check_arch_features('// cp.async\nasm volatile("cp.async.ca.shared.global");\n',
                            "sm_75")


def test_an_arch_nvrtc_does_not_compile_for_names_those_it_does():
    func = hand_schedules.gpu_matmul(64, 64, 64).func
    with pytest.raises(BuildError, match=r"NVRTC \d+\.\d+ does not compile for sm_70: it "
                                         r"compiles for sm_75, .*sm_90"):
        sched.build(func, target="cuda", arch="sm_70")
