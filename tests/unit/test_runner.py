"""losslens.runner: the options every log command shares, and the gate over a log's findings."""

from __future__ import annotations

import pytest

from losslens import runner
from losslens.detectors import REGISTRY
from losslens.errors import UsageError
from tests.conftest import FIXTURES


def test_options_take_the_settings_where_the_command_is_silent(tmp_path, monkeypatch) -> None:
    (tmp_path / "losslens.toml").write_text('format = "kv"\nignore = ["spike"]\nmetric = ["acc"]\n')
    monkeypatch.chdir(tmp_path)
    o = runner.Options.make(None, None, None, None)
    assert (o.fmt, o.format, o.ignore, o.metrics) == ("kv", "kv", frozenset({"spike"}), ("acc",))
    o = runner.Options.make(None, "auto", "ladder,plateau", ["loss"])
    assert (o.format, o.ignore, o.metrics) == (None, frozenset({"ladder", "plateau"}), ("loss",))


def test_select_leaves_out_every_other_kind() -> None:
    o = runner.Options.make(None, None, None, None, select=["nonfinite"])
    assert o.ignore == frozenset(d.name for d in REGISTRY) - {"nonfinite"}


@pytest.mark.parametrize(("kwargs", "said"), [
    ({"ignore": "sparkles"}, "unknown finding kind(s) for --ignore: sparkles"),
    ({"quiet": True, "verbose": True}, "--quiet and --verbose disagree"),
    ({"jobs": 0}, "--jobs must be >= 1, got 0"),
    ({"fmt": "excel"}, "excel"),
])
def test_options_that_cannot_work_are_one_line(kwargs: dict, said: str) -> None:
    args = {"config": None, "fmt": None, "ignore": None, "metric": None, **kwargs}
    with pytest.raises(UsageError) as e:
        runner.Options.make(**args)
    assert said in str(e.value)


def test_a_log_read_and_analysed_is_one_result_with_its_exit_code() -> None:
    seed = str(FIXTURES / "seed004_dflash.log")
    options = runner.Options.make(None, None, None, None)
    [result] = list(runner.results(runner.walk([seed]), options, [seed]))
    assert result.source == seed and result.error is None
    assert [f.kind for f in result.report.findings] == ["ladder"]
    assert runner.unchecked_loss(result, options.settings.registry()) is None
