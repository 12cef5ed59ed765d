"""Cost models: rank scheduled functions without running them (higher score = faster).

    MemoryMovementModel(target="c")   # analytical: bytes between memory levels, FLOPs,
                                      # parallelism; no device, no training
    LearnedModel(seed=0)              # xgboost on features, trained on measurements; the
                                      # analytical scores until it has trained
    spearman(scores, speeds)          # how well a model ranks measured candidates
"""

from sched.autoscheduler.cost.base import CostModel
from sched.autoscheduler.cost.features import FEATURE_NAMES, features
from sched.autoscheduler.cost.learned import LearnedModel
from sched.autoscheduler.cost.machine import Machine
from sched.autoscheduler.cost.memory_movement import MemoryMovementModel
from sched.autoscheduler.cost.rank import spearman

__all__ = ["FEATURE_NAMES", "CostModel", "LearnedModel", "Machine", "MemoryMovementModel",
           "features", "spearman"]
