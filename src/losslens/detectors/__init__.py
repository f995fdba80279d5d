"""Detectors, one module per finding kind (trend.py: divergence, plateau, accuracy drop), in an
explicit ordered registry. A detector is a frozen dataclass whose fields are its parameters
(``Spike(z=8.0)``); ``detect(series)`` returns its findings, or a ``Skipped`` saying why it could
not look; ``analysis.analyze`` runs the registry over every metric each detector wants."""

from __future__ import annotations

from losslens.detectors.base import Detector, Series
from losslens.detectors.ladder import Ladder
from losslens.detectors.multimodal import Multimodal
from losslens.detectors.nonfinite import NonFinite
from losslens.detectors.overfitting import Overfitting
from losslens.detectors.periodicity import Periodicity
from losslens.detectors.pipeline import PipelineStall
from losslens.detectors.spike import Spike
from losslens.detectors.throughput import ThroughputDrop
from losslens.detectors.trend import AccuracyDrop, Divergence, Plateau

REGISTRY: tuple[Detector, ...] = (
    NonFinite(),
    Ladder(),
    Multimodal(),
    Periodicity(),
    Spike(),
    Divergence(),
    Plateau(),
    AccuracyDrop(),
    Overfitting(),
    PipelineStall(),
    ThroughputDrop(),
)

__all__ = ["REGISTRY", "AccuracyDrop", "Detector", "Divergence", "Ladder", "Multimodal", "NonFinite",
           "Overfitting", "Periodicity", "PipelineStall", "Plateau", "Series", "Spike", "ThroughputDrop"]
