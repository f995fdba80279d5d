"""losslens in a Lightning ``Trainer``: ``LossLensCallback``.

    from losslens.integrations.lightning import LossLensCallback

    trainer = L.Trainer(..., callbacks=[LossLensCallback(record="fed.jsonl", fail_on="error")])

``record``: what each optimizer step fed, one JSON line per step with the lengths of every
micro-batch (``accumulate_grad_batches`` of them), numbered as ``self.log`` numbers the step
(the trainer's ``global_step`` when the step began, from 0), each rank to its own file. The
lengths come from the batch (``attention_mask``, ``labels``, ``input_ids``, a ``lengths`` entry,
or the first tensor's width).

``fail_on``: the detectors run on what the module logs (``trainer.callback_metrics``, on rank 0);
a finding at or above it sets ``trainer.should_stop`` (the epoch loop ends cleanly) and the
report is written to ``trainer.log_dir/losslens-findings.json``.

lightning is imported here, not by ``import losslens``."""

from __future__ import annotations

from typing import Any

from lightning.pytorch import Callback

from losslens.findings import Severity
from losslens.integrations.core import LiveCheck, Recorder, lengths_of


class LossLensCallback(Callback):  # type: ignore[misc]
    """Records what each optimizer step fed (``record``) and/or stops training on a finding at or
    above ``fail_on`` (see the module's text)."""

    def __init__(self, record: str | None = None, fail_on: str | Severity | None = None,
                 budget: float = 0.01):
        self.record, self.fail_on, self.budget = record, fail_on, budget
        self.recorder: Recorder | None = None
        self.live: LiveCheck | None = None
        self._step = 0

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        if self.record is not None:
            self.recorder = Recorder(self.record, trainer.global_rank, trainer.world_size)
        if self.fail_on is not None and trainer.global_rank == 0:
            where = trainer.log_dir or trainer.default_root_dir
            self.live = LiveCheck(self.fail_on, where, self.budget, source=f"{where} (live)")

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        self._step = trainer.global_step
        if self.recorder is not None:
            self.recorder.micro_batch(lengths_of(batch))

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if trainer.global_step == self._step:
            return  # (still accumulating gradients)
        if self.recorder is not None:
            self.recorder.step(self._step)
        if self.live is not None:
            metrics = {k: v.item() if hasattr(v, "item") else v
                       for k, v in trainer.callback_metrics.items()}
            found = self.live.log(self._step, metrics)
            if found is not None:
                trainer.should_stop = True
                print(f"losslens: stopping training at step {self._step}: {found.severity} "
                      f"{found.kind}: {found.summary}", flush=True)

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        if self.recorder is not None:
            self.recorder.close()
        if self.live is not None:
            self.live.finish()
            self.live.write()
