"""Lazily compiled patterns: compiled at their first use, then the compiled pattern's own
methods; a start-up that reads a key=value log compiles none of the 'key: value' reader's."""

from __future__ import annotations

import copy
import re
import subprocess
import sys

from losslens.logs.regex import lazy
from tests.conftest import FIXTURES


def test_a_lazy_pattern_compiles_at_its_first_use_and_then_is_the_compiled_pattern() -> None:
    source = r"(?i)\b(loss)\s*[:=]\s*(\d+(?:\.\d+)?)"
    p, compiled = lazy(source), re.compile(source)
    assert vars(p) == {"_args": (source, 0)}  # nothing compiled yet
    line = "Step 3 | LOSS: 2.5 | loss=1"
    assert [m.groups() for m in p.finditer(line)] == [m.groups() for m in compiled.finditer(line)]
    assert vars(p)["search"].__self__ is vars(p)["sub"].__self__  # one compiled pattern, held
    assert p.sub(r"\1", line) == compiled.sub(r"\1", line)
    assert (p.pattern, p.flags, p.groups) == (compiled.pattern, compiled.flags, compiled.groups)
    assert lazy("a+", re.IGNORECASE).fullmatch("AAA") is not None
    assert repr(lazy("x")) == "lazy('x')" and copy.copy(lazy("x")).pattern == "x"


def test_reading_a_key_value_log_compiles_none_of_the_colon_readers_patterns() -> None:
    code = ("import sys; from losslens import read_log; read_log(sys.argv[1])\n"
            "from losslens.logs.formats import colon; from losslens.logs import sink\n"
            "print(sorted(n for n, v in vars(colon).items()\n"
            "             if type(v).__name__ == '_Lazy' and 'search' in vars(v)),\n"
            "      'search' in vars(sink.SECRETS))")
    proc = subprocess.run([sys.executable, "-c", code, str(FIXTURES / "seed004_dflash.log")],
                          capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[] False"
    colon = subprocess.run([sys.executable, "-c", code, str(FIXTURES / "custom_colon.log")],
                           capture_output=True, text=True, check=True)
    assert "'PAIR'" in colon.stdout  # a 'key: value' log compiles what its reader uses
