"""`invoke all`: the whole chain on this machine, each stage run only when the machine allows it.

Plain logic here (which stages run, why a stage is skipped, the weights policy, the
summary record); tasks.py calls the stage tasks in the order :data:`STAGES` gives.
"""

from .plan import (
    STAGES,
    AllSummary,
    StageDecision,
    StageOutcome,
    Facts,
    check_stage_names,
    decide,
    facts_from_doctor,
    resolve_weights,
)

__all__ = ["STAGES", "AllSummary", "StageDecision", "StageOutcome", "Facts", "check_stage_names", "decide",
           "facts_from_doctor", "resolve_weights"]
