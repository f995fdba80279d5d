"""Settings: defaults < config file (--config, else ./losslens.toml, else [tool.losslens] in
./pyproject.toml) < command line. Unknown keys and bad values are errors that name the key."""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from losslens.errors import UsageError

# top-level keys: name -> (default, type, help)
TOP: dict[str, tuple[Any, type, str]] = {
    "format": ("auto", str, "log format, or auto to detect it from the content"),
    "fail_on": ("error", str, "check/watch: the severity that fails (info, warning, error)"),
    "select": ([], list, "finding kinds to run (empty: every kind), as --select"),
    "ignore": ([], list, "finding kinds to leave out"),
    "metric": ([], list, "the column(s) to analyse as the loss (the first is the loss), as --metric"),
}
WATCH: dict[str, tuple[Any, type, str]] = {
    "window": (5000, int, "records kept and analysed (memory stays flat)"),
    "interval_s": (0.3, float, "seconds between polls of the file and re-analyses"),
    "confirm": (2, int, "consecutive analyses a finding must appear in before it is announced "
                         "(a NaN/inf: at once)"),
    "cooldown_s": (600.0, float, "seconds before an unchanged active finding is announced again"),
    "exit_on": ("", str, "exit 1 at the first announced finding at or above this severity (empty: "
                "follow until stopped)"),
}


# the least value of a numeric setting (default: 1 for counts, 0 for the rest); counts of 0
# would make a detector or the watcher meaningless (window = 0 never alerts)
LOWEST: dict[str, int | float] = {"seed": 0, "cooldown_s": 0, "interval_s": 0.01, "window": 10}


@dataclass
class Settings:
    """The settings a losslens.toml or [tool.losslens] gives (defaults where it is silent);
    ``registry()`` builds the detectors with their overrides."""
    format: str = "auto"
    fail_on: str = "error"
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    metric: list[str] = field(default_factory=list)
    watch: dict[str, Any] = field(default_factory=lambda: {k: v[0] for k, v in WATCH.items()})
    detectors: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> overrides
    source: str = "built-in defaults"
    given: set[str] = field(default_factory=set)  # the keys the file set ('watch.window', ...)

    def registry(self) -> tuple:
        """The detector registry with this file's parameters."""
        from losslens.detectors import REGISTRY

        return tuple(type(d)(**self.detectors[d.name]) if d.name in self.detectors else d
                     for d in REGISTRY)


def detector_parameters() -> dict[str, dict[str, Any]]:
    """Every detector's parameters and defaults: the fields of its frozen dataclass."""
    from losslens.detectors import REGISTRY

    out = {}
    for det in REGISTRY:
        out[det.name] = {f.name: f.default for f in dataclasses.fields(det)}  # type: ignore[arg-type]
    return out


def _check(key: str, value: Any, default: Any, where: str) -> Any:
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif isinstance(default, list):
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
    else:
        ok = isinstance(value, str)
    if not ok:
        raise UsageError(f"bad value for {key!r}: {clip(repr(value))} (expected {type(default).__name__})",
                         source=where)
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise UsageError(f"bad value for {key!r}: {value!r} (must be a finite number)", source=where)
        low = LOWEST.get(key.rsplit(".", 1)[-1], 1 if isinstance(default, int) else 0)
        if value < low:
            raise UsageError(f"bad value for {key!r}: {value!r} (must be >= {low})", source=where)
        if key == "watch.interval_s" and not 0.01 <= value <= 3600:
            raise UsageError(f"bad value for {key!r}: {value!r} (0.01 to 3600 seconds)", source=where)
    return value


def parse(data: dict[str, Any], where: str) -> Settings:
    """Settings from a parsed TOML table; an unknown key or a value of the wrong type is a UsageError
    naming the key and ``where``."""
    s = Settings(source=where)
    params = detector_parameters()
    for key, value in data.items():
        if key in TOP:
            setattr(s, key, _check(key, value, TOP[key][0], where))
            s.given.add(key)
        elif key == "watch" and isinstance(value, dict):
            for k, v in value.items():
                if k not in WATCH:
                    raise UsageError(f"unknown key 'watch.{clip(k)}' (known: {', '.join(WATCH)})",
                                     source=where)
                s.watch[k] = _check(f"watch.{k}", v, WATCH[k][0], where)
                s.given.add(f"watch.{k}")
        elif key == "detectors" and isinstance(value, dict):
            for name, table in value.items():
                if name not in params or not isinstance(table, dict):
                    raise UsageError(f"unknown detector 'detectors.{clip(name)}' (known: "
                                     f"{', '.join(params)})", source=where)
                for k, v in table.items():
                    if k not in params[name]:
                        raise UsageError(f"unknown key 'detectors.{name}.{clip(k)}' (known: "
                                         f"{', '.join(params[name])})", source=where)
                    s.detectors.setdefault(name, {})[k] = _check(f"detectors.{name}.{k}", v,
                                                                 params[name][k], where)
                    s.given.add(f"detectors.{name}.{k}")
        else:
            known = ", ".join([*TOP, "watch", "detectors"])
            raise UsageError(f"unknown key {clip(repr(key))} (known: {known})", source=where)
    if s.fail_on not in ("info", "warning", "error"):
        raise UsageError(f"bad value for 'fail_on': {clip(repr(s.fail_on))} (info, warning or error)",
                         source=where)
    if s.watch["exit_on"] not in ("", "info", "warning", "error"):
        raise UsageError(f"bad value for 'watch.exit_on': {clip(repr(s.watch['exit_on']))} (info, warning "
                         "or error)", source=where)
    return s


def load(path: str | None = None, cwd: Path | None = None) -> Settings:
    """--config FILE, else losslens.toml, else [tool.losslens] in pyproject.toml, else defaults."""
    cwd = cwd or Path.cwd()
    if path is not None:
        data = _read(Path(path))
        tool = _tool_table(data, path)
        if tool is not None:  # a pyproject.toml-style file: its [tool.losslens] table
            return parse(tool, f"{path} [tool.losslens]")
        return parse(data, path)
    if (cwd / "losslens.toml").is_file():
        return parse(_read(cwd / "losslens.toml"), "losslens.toml")
    pyproject = cwd / "pyproject.toml"
    if pyproject.is_file() and _mentions_losslens(pyproject):
        tool = _tool_table(_read(pyproject), "pyproject.toml")
        if tool is not None:
            return parse(tool, "pyproject.toml [tool.losslens]")
    return Settings()


def _mentions_losslens(path: Path) -> bool:
    """A [tool.losslens] table (or tool.losslens keys) needs the word: a project's pyproject.toml
    without it is not parsed (the gate's start-up: the TOML parser is 50 ms to import)."""
    try:
        with open(path, "rb") as f:
            head = f.read(MAX_CONFIG_BYTES + 1)
    except OSError:
        return True  # let _read say why it cannot be read
    # (an implicit pyproject.toml in UTF-16 spells the word with NULs between its letters: read
    # it, and _read says it is not UTF-8, rather than pass over its settings without a word)
    return b"losslens" in head or "losslens".encode("utf-16-le") in head


MAX_CONFIG_BYTES = 1 << 20  # a settings file is a few lines: a larger one is not one


def _read(path: Path) -> dict[str, Any]:
    """A TOML settings file, read whole but bounded (a FIFO, a device or a huge file is an
    error, never a wait or an unbounded read); anything it cannot be is a UsageError naming it."""
    import stat
    import tomllib

    from losslens.logs.source import special_kind

    try:
        kind = special_kind(os.stat(path).st_mode)
        if kind is not None:
            raise UsageError(f"cannot read config: {kind}, not a regular file", source=str(path))
        with open(path, "rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
        if stat.S_ISDIR(os.stat(path).st_mode):
            raise IsADirectoryError
    except FileNotFoundError:
        raise UsageError("config file not found", source=str(path)) from None
    except IsADirectoryError:
        raise UsageError("cannot read config: a folder, not a file", source=str(path)) from None
    except OSError as exc:
        raise UsageError(f"cannot read config: {exc.strerror}", source=str(path)) from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise UsageError(f"not a settings file: over {MAX_CONFIG_BYTES >> 20} MiB", source=str(path))
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise UsageError("the file is UTF-16; TOML is UTF-8 (save it as UTF-8)", source=str(path))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"not UTF-8 text (byte {exc.start:,}): a settings file is TOML",
                         source=str(path)) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = getattr(exc, "lineno", None)
        raise UsageError(f"invalid TOML: {clip(str(exc))}", source=str(path), line=line) from None
    except RecursionError:
        raise UsageError("invalid TOML: nested too deeply to read", source=str(path)) from None


def clip(text: str, at: int = 200) -> str:
    """A value quoted in a message: at most ``at`` characters of it (a 20 MB bad value is not
    put on stderr whole)."""
    return text if len(text) <= at else f"{text[:at]}... ({len(text):,} characters)"


def _tool_table(data: dict[str, Any], where: str) -> dict[str, Any] | None:
    """The [tool.losslens] table of a pyproject-style file, None where there is none; a
    UsageError where it is there but not a table (`[tool] losslens = 5`)."""
    tool = data.get("tool")
    if not isinstance(tool, dict) or "losslens" not in tool:
        return None
    table = tool["losslens"]
    if not isinstance(table, dict):
        raise UsageError(f"[tool.losslens] must be a table of settings, not {type(table).__name__} "
                         f"{clip(repr(table))}", source=where)
    return table


def effective(settings: Settings, cli: dict[str, Any]) -> list[tuple[str, Any, str]]:
    """Every setting in effect as (key, value, where it came from): the command line (``cli``:
    the options given, by key), the settings file, or the built-in default."""
    params = detector_parameters()
    rows: list[tuple[str, Any, str]] = []

    def add(key: str, value: Any) -> None:
        where = ("command line" if key in cli else settings.source if key in settings.given
                 else "built-in default")
        rows.append((key, cli.get(key, value), where))

    for key in TOP:
        add(key, getattr(settings, key))
    for key in WATCH:
        add(f"watch.{key}", settings.watch[key])
    for name, defaults in params.items():
        for key, default in defaults.items():
            add(f"detectors.{name}.{key}", settings.detectors.get(name, {}).get(key, default))
    return rows


def reference() -> str:
    """The configuration reference in Markdown (the README's section is checked against it)."""
    rows = ["| key | default | meaning |", "|---|---|---|"]
    for k, (default, _, text) in TOP.items():
        rows.append(f"| `{k}` | `{default!r}` | {text} |")
    for k, (default, _, text) in WATCH.items():
        rows.append(f"| `watch.{k}` | `{default!r}` | {text} |")
    for name, params in detector_parameters().items():
        for k, default in params.items():
            rows.append(f"| `detectors.{name}.{k}` | `{default!r}` | {name} detector |")
    return "\n".join(rows)
