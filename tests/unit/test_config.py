"""losslens.config: settings from --config, losslens.toml or [tool.losslens], each key checked
against its default's type and bounds, every error one line naming the key and the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from losslens.config import Settings, detector_parameters, effective, load, parse
from losslens.errors import UsageError


def test_no_file_gives_the_built_in_defaults(tmp_path: Path) -> None:
    s = load(cwd=tmp_path)
    assert s.source == "built-in defaults" and s.fail_on == "error" and s.format == "auto"
    assert s.registry() == Settings().registry()


def test_losslens_toml_wins_over_pyproject(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.losslens]\nfail_on = "info"\n')
    assert load(cwd=tmp_path).fail_on == "info"
    (tmp_path / "losslens.toml").write_text('fail_on = "warning"\n[detectors.spike]\nz = 6.5\n')
    s = load(cwd=tmp_path)
    assert (s.source, s.fail_on) == ("losslens.toml", "warning")
    spike = next(d for d in s.registry() if d.name == "spike")
    assert spike.z == 6.5 and spike.window == detector_parameters()["spike"]["window"]
    assert s.given == {"fail_on", "detectors.spike.z"}


def test_a_pyproject_without_the_word_is_not_parsed(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\nthis is not toml at all [[[")
    assert load(cwd=tmp_path).source == "built-in defaults"


@pytest.mark.parametrize(("data", "said"), [
    ({"fail_on": "fatal"}, "bad value for 'fail_on': 'fatal' (info, warning or error)"),
    ({"colour": True}, "unknown key 'colour'"),
    ({"detectors": {"spike": {"z": "high"}}}, "bad value for 'detectors.spike.z': 'high' (expected float)"),
    ({"detectors": {"spike": {"zz": 1.0}}}, "unknown key 'detectors.spike.zz' (known: window, z,"),
    ({"detectors": {"sparks": {}}}, "unknown detector 'detectors.sparks'"),
    ({"detectors": {"spike": {"window": 0}}}, "bad value for 'detectors.spike.window': 0 (must be >= 10)"),
    ({"detectors": {"spike": {"z": float("nan")}}}, "(must be a finite number)"),
    ({"watch": {"interval_s": 7200}}, "(0.01 to 3600 seconds)"),
])
def test_a_bad_setting_is_one_line_naming_the_key_and_the_file(data: dict, said: str) -> None:
    with pytest.raises(UsageError) as e:
        parse(data, "losslens.toml")
    assert said in str(e.value) and "losslens.toml" in str(e.value) and "\n" not in str(e.value)


def test_effective_settings_say_where_each_value_came_from(tmp_path: Path) -> None:
    (tmp_path / "losslens.toml").write_text('fail_on = "warning"\n')
    rows = {key: (value, where) for key, value, where in effective(load(cwd=tmp_path), {"format": "kv"})}
    assert rows["fail_on"] == ("warning", "losslens.toml")
    assert rows["format"][0] == "kv"
