"""Callbacks for the training frameworks: record what each optimizer step fed (for ``losslens
replay --batches``), and run the detectors live on the metrics the trainer logs, stopping the run
cleanly on a finding at or above ``fail_on``.

- ``losslens.integrations.huggingface.LossLensCallback``: a ``transformers.TrainerCallback``;
- ``losslens.integrations.lightning.LossLensCallback``: a ``lightning.Callback``.

Each framework is imported only by its own module; what they share (the record, the live
check, the lengths of a batch) is in ``losslens.integrations.core``, which needs neither."""

from losslens.integrations import core

__all__ = ["core"]  # (huggingface and lightning import their framework: import them by name)
