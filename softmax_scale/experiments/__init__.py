"""The toolkit's studies, each one module behind one interface (:class:`Experiment`).

:data:`EXPERIMENTS` maps a name to its experiment; ``softmax-scale run NAME`` runs any of them
resumably (:func:`run_experiment`).  The modules are imported when an experiment is first
looked up, so listing the names costs nothing.

=====================  =============================================================
``alpha_table``        the mean-field ``alpha*`` over the note's grid, with the laws
``real_heads``         every head of a real encoder on real text (:mod:`.real_heads`)
``real_extrapolation`` a real decoder past its training length (:mod:`.real_extrapolation`)
``mlm``                masked LMs trained with each scale (:mod:`.mlm`)
``alpha``              masked LMs trained with a constant ``alpha`` (:mod:`.alpha`)
``causal``             decoders trained at ``L``, tested at ``8L`` and ``16L`` (:mod:`.causal`)
``real_passkey``       SmolLM2-135M retrieving a pass key inside and past ``L`` (:mod:`.real_passkey`)
``real_copy``          SmolLM2-135M copying ``m`` tokens back inside and past ``L`` (:mod:`.real_copy`)
``engine_cost``        SmolLM2-135M's loss under an engine's wrong factor on ``q.k`` (:mod:`.engine_cost`)
=====================  =============================================================
"""

from __future__ import annotations

from .base import (
    EXPERIMENTS,
    LM_TASKS,
    RESULTS,
    Evidence,
    Experiment,
    applied_at_test,
    at_test_label,
    resolve_experiment,
    run_experiment,
)

__all__ = ["EXPERIMENTS", "LM_TASKS", "RESULTS", "Evidence", "Experiment", "applied_at_test", "at_test_label",
           "resolve_experiment", "run_experiment"]
