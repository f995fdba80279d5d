"""Detectors, one module per finding kind, in an explicit ordered registry."""

from __future__ import annotations

from losslens.detectors.base import Detector, Series

REGISTRY: tuple[Detector, ...] = ()

__all__ = ["REGISTRY", "Detector", "Series"]
