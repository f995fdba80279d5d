"""Damaged files (stray bytes, CRLF, invalid UTF-8, cut and glued lines, vertical tabs, stray
quotes and brackets) read the same through every column-wise reader as line by line."""

from __future__ import annotations

import random

import pytest

from losslens import synth
from tests.naive import assert_same_as_per_line

pytestmark = pytest.mark.usefixtures("columnar")


def _csv(n: int) -> list[str]:
    return ["step,loss,lr,grad_norm"] + [f"{i},{3 - i / n:.4f},1e-4,{1 + i % 7 / 10:.3f}" for i in range(n)]


def _hf(n: int) -> list[str]:
    return [str({"loss": round(3 - i / n, 4), "grad_norm": round(1 + i % 7 / 10, 4),
                 "learning_rate": 1e-4, "epoch": round(i / n, 2)}) for i in range(n)]


def _bars(epochs: int) -> list[str]:
    """Lightning's bar, 100 '\r' redraws a line, the eval loss in the postfix after the first epoch."""
    return ["\r".join(f"Epoch {e}:  {i}%|██ | {i}/100 [00:01<00:09,  9.50it/s, v_num=0, "
                      f"train_loss={3 - e / 20 - i / 1000:.3f}"
                      + (f", val_loss={2 - e / 30:.3f}]" if e else "]")
                      for i in range(1, 101)) for e in range(epochs)]


SOURCES = {
    "jsonl": lambda: synth.jsonl_lines(2500),
    "csv": lambda: _csv(3000),
    "hf": lambda: _hf(3000),
    "megatron": lambda: synth.megatron_lines(1500),
    "nanogpt": lambda: synth.nanogpt_lines(6000, every=2),
    "modded-nanogpt": lambda: [f"step:{i}/3000 train_loss:{4 - i / 1000:.4f} train_time:{i * 391}ms "
                               f"step_avg:391.{i % 10}ms" for i in range(3000)],
    "kv": lambda: [f"[rank{i % 2}]: {x}" for i, x in enumerate(synth.dflash_lines(1500))],
    "fairseq": lambda: synth.fairseq_lines(1500),
    "torchtitan": lambda: synth.torchtitan_lines(2500),
    "olmo": lambda: synth.olmo_lines(600),
    "lightning": lambda: _bars(25),
    "colon": lambda: [f"2025-03-02 10:00:{i % 60:02d},000 - INFO - Step {i}/3000 | loss: {3 - i / 3000:.4f} "
                      f"| lr: 1.00e-04 | grad norm: {0.8 + i % 7 / 10:.3f}" for i in range(3000)],
}
DAMAGE = [b"\r\n", b"\xff\xfe\xc3", b"\x0b", b"\t", b"nan", b"inf", b"-", b"'", b'"', b"{", b"}", b"|",
          b":", b"=", b",", b"[", b"]", b"\n", b" "]


def damaged(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(5, 40)):
        i = rng.randrange(len(out))
        if rng.random() < 0.3:
            del out[i:i + rng.randrange(1, 40)]  # cut: a line shortened or two glued together
        else:
            out[i:i] = rng.choice(DAMAGE)
    return bytes(out)


@pytest.mark.parametrize("format", list(SOURCES))
@pytest.mark.parametrize("seed", [0, 1, 1012, 1014, 1015, 1022, 2002, 5033])  # (1012–5033: each found one)
def test_damaged_files(tmp_path, format: str, seed: int) -> None:
    path = tmp_path / "damaged.log"
    path.write_bytes(damaged(("\n".join(SOURCES[format]()) + "\n").encode(), random.Random(seed)))
    assert_same_as_per_line(path, format)
