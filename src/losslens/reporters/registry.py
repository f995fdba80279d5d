"""``--output-format NAME`` → its reporter (``analyze --markdown`` is ``markdown``)."""

from __future__ import annotations

from losslens.reporters.base import Reporter
from losslens.reporters.ci import GitHub, JUnit, Sarif
from losslens.reporters.jsonl import Json
from losslens.reporters.markdown import Markdown
from losslens.reporters.text import TextReporter

REPORTERS: dict[str, Reporter] = {r.name: r for r in (
    TextReporter(), Json(), GitHub(), JUnit(), Sarif(), Markdown())}
