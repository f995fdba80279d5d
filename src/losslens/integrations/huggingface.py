"""losslens in a Hugging Face ``Trainer``: ``LossLensCallback``.

    from losslens.integrations.huggingface import LossLensCallback

    trainer = Trainer(..., callbacks=[LossLensCallback(record="fed.jsonl", fail_on="error")])

``record``: what each optimizer step fed, one JSON line per step with the lengths of every
micro-batch (``replay --batches fed.jsonl --log train.log`` reads it); each rank writes its own
file (``fed.rank1.jsonl``, ...). The lengths are taken from the batch the model's forward gets
(its attention mask: the samples' unpadded lengths, as ``group_by_length`` measures them).

``fail_on``: the detectors run on the metrics the Trainer logs (on the main process); a finding
at or above this level stops training cleanly (``control.should_training_stop``: the Trainer
ends the step, saves as configured and returns), and the report is written to
``output_dir/losslens-findings.json``. A non-finite loss or grad norm is judged at the record
that logs it; the other detectors run as often as 1 % of the run's time allows, and at the end.

transformers is imported here, not by ``import losslens``."""

from __future__ import annotations

import time
from typing import Any

from transformers import TrainerCallback

from losslens.findings import Severity
from losslens.integrations.core import LiveCheck, Recorder, lengths_of


class LossLensCallback(TrainerCallback):  # type: ignore[misc]
    """Records what each optimizer step fed (``record``) and/or stops training on a finding at or
    above ``fail_on`` (see the module's text). ``budget``: the share of the run's time the live
    detectors may take."""

    def __init__(self, record: str | None = None, fail_on: str | Severity | None = None,
                 budget: float = 0.01):
        self.record, self.fail_on, self.budget = record, fail_on, budget
        self.recorder: Recorder | None = None
        self.live: LiveCheck | None = None
        self._hook: Any = None
        self.seconds = 0.0  # spent in this callback's hooks: its cost to the run

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kw: Any) -> None:
        if self.record is not None and model is not None:
            self.recorder = Recorder(self.record, args.process_index, args.world_size)
            self._hook = model.register_forward_pre_hook(self._fed, with_kwargs=True)
        if self.fail_on is not None and state.is_world_process_zero:
            self.live = LiveCheck(self.fail_on, args.output_dir, self.budget,
                                  source=f"{args.output_dir} (live)")

    def _fed(self, module: Any, args: tuple, kwargs: dict) -> None:
        if self.recorder is not None and module.training:  # (not an evaluation's forward)
            started = time.perf_counter()
            self.recorder.micro_batch(lengths_of(kwargs if kwargs else (args[0] if args else None)))
            self.seconds += time.perf_counter() - started

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if self.recorder is not None:
            started = time.perf_counter()
            self.recorder.step(state.global_step)
            self.seconds += time.perf_counter() - started

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kw: Any) -> None:
        if self.live is None or not logs:
            return
        started = time.perf_counter()
        found = self.live.log(state.global_step, logs)
        self.seconds += time.perf_counter() - started
        if found is not None:
            control.should_training_stop = True
            print(f"losslens: stopping training at step {state.global_step}: {found.severity} "
                  f"{found.kind}: {found.summary} (report: {args.output_dir}/losslens-findings.json)",
                  flush=True)

    def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        if self.recorder is not None:
            self.recorder.close()
        if self.live is not None:
            self.live.finish()
            self.live.write()
