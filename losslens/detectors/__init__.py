"""Detectors, one module per finding kind, in an explicit ordered registry."""

from __future__ import annotations

from losslens.detectors.base import Detector, Series
from losslens.detectors.ladder import Ladder
from losslens.detectors.multimodal import Multimodal
from losslens.detectors.periodicity import Periodicity

REGISTRY: tuple[Detector, ...] = (
    Ladder(),
    Multimodal(),
    Periodicity(),
)

__all__ = ["REGISTRY", "Detector", "Series"]
