"""Detectors, one module per finding kind family, in an explicit ordered registry."""

from __future__ import annotations

from losslens.detectors.base import Detector, Series
from losslens.detectors.health import (
    AccuracyDrop,
    Divergence,
    NonFinite,
    Overfitting,
    Plateau,
    Spike,
    ThroughputDrop,
)
from losslens.detectors.ladder import Ladder
from losslens.detectors.multimodal import Multimodal
from losslens.detectors.periodicity import Periodicity
from losslens.detectors.pipeline import PipelineStall

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

__all__ = ["REGISTRY", "Detector", "Series"]
