"""Console formats of well-known trainers: nanoGPT, modded-nanogpt, llm.c, Megatron, fairseq,
torchtitan."""

from __future__ import annotations

import re

from losslens.logs.base import (
    ANSI,
    COMMON_NOISE,
    Format,
    LineParser,
    RegexLineParser,
    leading_time,
)
from losslens.logs.names import NONFINITE, NUMBER, is_eval, parse_number
from losslens.logs.records import Sink, Value

N = NUMBER
NUMERIC = rf"(?:{N}|{NONFINITE})"


def _sniff(patterns: tuple[re.Pattern[str], ...], lines: list[str]) -> int:
    return sum(1 for line in lines if any(p.search(line) for p in patterns))


# --- nanoGPT ---------------------------------------------------------------------------------
NANO_ITER = re.compile(
    rf"^iter (\d+): loss ({NUMERIC}), time ({N})ms(?:, mfu ({N})%)?", re.IGNORECASE)
NANO_EVAL = re.compile(rf"^step (\d+): train loss ({NUMERIC}), val loss ({NUMERIC})", re.IGNORECASE)


class _NanoParser(RegexLineParser):
    noise = ((re.compile(r"^saving checkpoint"), "checkpoint message"), *COMMON_NOISE)

    def feed(self, lineno: int, line: str) -> str | None:
        m = NANO_ITER.match(line)
        if m:
            metrics: dict[str, float | None] = {"loss": parse_number(m.group(2)),
                                                "step_time_s": float(m.group(3)) / 1000}
            if m.group(4) is not None and float(m.group(4)) != -100.0:  # -100: nanoGPT's "unset"
                metrics["mfu"] = float(m.group(4))
            self.sink.names.update(loss="loss", step_time_s="time", mfu="mfu")
            self.sink.emit(lineno, int(m.group(1)), metrics)
            return None
        m = NANO_EVAL.match(line)
        if m:
            self.sink.names.update(eval_loss="val loss", eval_train_loss="train loss")
            self.sink.emit(lineno, int(m.group(1)), {"eval_train_loss": parse_number(m.group(2)),
                                                     "eval_loss": parse_number(m.group(3))})
            return None
        return self.classify_noise(line)


class NanoGPT(Format):
    name = "nanogpt"
    title = "nanoGPT train.py stdout"
    example = "iter 425: loss nan, time 1431.27ms, mfu 0.01%"

    def sniff(self, lines: list[str]) -> int:
        return _sniff((NANO_ITER, NANO_EVAL), lines)

    def parser(self, sink: Sink) -> LineParser:
        return _NanoParser(sink)


# --- modded-nanogpt and llm.c ----------------------------------------------------------------
MODDED = re.compile(r"^step:(\d+)/(\d+) ((?:\w+:\S+\s*)+)$")
MODDED_PAIR = re.compile(r"(\w+):(\S+)")
LLMC = re.compile(rf"^s:(\d+) (trl|tel):({NUMERIC})\s*$")
LLMC_NEW = re.compile(
    rf"^step\s+(\d+)/(\d+) \| (?:train )?loss ({NUMERIC}) \| norm ({NUMERIC}) \| lr ({N})"
    rf"(?: \| ({N}) ms)?(?: \| ({N})% bf16 MFU)?(?: \| ({N}) tok/s)?")


class _ModdedParser(RegexLineParser):
    noise = COMMON_NOISE

    def feed(self, lineno: int, line: str) -> str | None:
        m = MODDED.match(line.strip())
        if m:
            pairs = MODDED_PAIR.findall(m.group(3))
            metrics: dict[str, float] = {}
            for key, raw in pairs:
                v = parse_number(raw)
                if v is None:
                    continue
                name = {"train_loss": "loss", "val_loss": "eval_loss", "train_time": "train_time_s",
                        "step_avg": "step_avg_s"}.get(key, key)
                metrics[name] = v
                self.sink.names.setdefault(name, key)
            if not self.sink.emit(lineno, int(m.group(1)), metrics):
                return "no training metric"
            return None
        m = LLMC.match(line.strip())
        if m:
            name = "loss" if m.group(2) == "trl" else "eval_loss"
            self.sink.names.setdefault(name, m.group(2))
            self.sink.emit(lineno, int(m.group(1)), {name: parse_number(m.group(3))})
            return None
        m = LLMC_NEW.match(line.strip())
        if m:
            new: dict[str, float | None] = {"loss": parse_number(m.group(3)),
                                            "grad_norm": parse_number(m.group(4)),
                                            "lr": float(m.group(5))}
            if m.group(6):
                new["step_time_s"] = float(m.group(6)) / 1000
            if m.group(8):
                new["tokens_per_s"] = float(m.group(8))
            self.sink.emit(lineno, int(m.group(1)), new)
            return None
        return self.classify_noise(line)


class ModdedNanoGPT(Format):
    name = "modded-nanogpt"
    title = "modded-nanogpt / llm.c main.log (step:N/T train_loss:X, s:N trl:X)"
    example = "step:14257/19073 train_loss:6.2790 train_time:5586124ms step_avg:391.87ms"

    def sniff(self, lines: list[str]) -> int:
        return _sniff((MODDED, LLMC, LLMC_NEW), [x.strip() for x in lines])

    def parser(self, sink: Sink) -> LineParser:
        return _ModdedParser(sink)


# --- Megatron / Megatron-DeepSpeed -----------------------------------------------------------
MEGA_ITER = re.compile(r"^\s*iteration\s+(\d+)\s*/\s*(\d+)\s*\|(.*)$")
MEGA_VALID = re.compile(r"validation loss at iteration\s+(\d+)\s*(?:on \w+ set)?\s*\|(.*)$")
MEGA_FIELD = re.compile(r"^\s*([^:|]+?)\s*:\s*(\S+)\s*$")
MEGA_NAMES = {
    "lm loss": "loss", "learning rate": "lr", "grad norm": "grad_norm", "loss scale": "loss_scale",
    "elapsed time per iteration (ms)": "step_time_s", "global batch size": "global_batch_size",
    "consumed samples": "consumed_samples", "consumed tokens": "consumed_tokens",
    "samples per second": "samples_per_s", "tokens per gpu per second (tgs)": "tokens_per_gpu_s",
    "tflops": "tflops", "number of skipped iterations": "skipped_iterations",
    "number of nan iterations": "nan_iterations", "num zeros": "num_zeros",
    "actual seqlen": "seq_len", "lm loss value": "eval_loss", "lm loss ppl": "eval_ppl",
}


class _MegatronParser(RegexLineParser):
    noise = ((re.compile(r"^-{10,}$"), "separator"), *COMMON_NOISE)

    def _fields(self, body: str) -> dict[str, float]:
        metrics: dict[str, float] = {}
        for part in body.split("|"):
            m = MEGA_FIELD.match(part)
            if not m:
                continue  # a field cut short by the line's width
            key = m.group(1).strip().lower()
            name = MEGA_NAMES.get(key)
            value = parse_number(m.group(2))
            if name is None or value is None:
                continue
            if name == "step_time_s":
                value /= 1000.0
            metrics[name] = value
            self.sink.names.setdefault(name, m.group(1).strip())
        return metrics

    def feed(self, lineno: int, line: str) -> str | None:
        m = MEGA_ITER.match(line)  # (a '[default7]: ' rank prefix is cut off by the reader)
        if m:
            if not self.sink.emit(lineno, int(m.group(1)), self._fields(m.group(3))):
                return "no training metric"
            return None
        m = MEGA_VALID.search(line)
        if m:
            if not self.sink.emit(lineno, int(m.group(1)), self._fields(m.group(2)), kind="eval"):
                return "no training metric"
            return None
        return self.classify_noise(line.strip())


class Megatron(Format):
    name = "megatron"
    title = "Megatron-LM / Megatron-DeepSpeed console ( iteration N/ M | ... | lm loss: X | ...)"
    example = (" iteration    29050/  311541 | consumed samples:     10728784 | elapsed time per "
               "iteration (ms): 22148.5 | learning rate: 9.849E-05 | lm loss: 7.343709E+00 | "
               "loss scale: 8192.0 | grad norm: 0.000 |")

    def sniff(self, lines: list[str]) -> int:
        return _sniff((MEGA_ITER, MEGA_VALID), lines)

    def parser(self, sink: Sink) -> LineParser:
        return _MegatronParser(sink)


# --- fairseq ---------------------------------------------------------------------------------
FAIRSEQ_INNER = re.compile(r"\|\s*train_inner\s*\|\s*epoch (\d+):\s*(\d+)\s*/\s*(\d+)\s+(.*)$")
FAIRSEQ_VALID = re.compile(r"\|\s*valid\s*\|\s*epoch (\d+)\s*\|(.*)$")
FAIRSEQ_TRAIN = re.compile(r"\|\s*train\s*\|\s*epoch (\d+)\s*\|")
FAIRSEQ_KV = re.compile(r"(\w+)=(\S+?)(?:,|$|\s)")
FAIRSEQ_PIPE = re.compile(r"^\s*(\w+) (\S+)\s*$")
FAIRSEQ_INFO = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \| \w+ \| [\w.]+ \|")


class _FairseqParser(RegexLineParser):
    noise = ((FAIRSEQ_TRAIN, "epoch summary"), (FAIRSEQ_INFO, "framework message"),
             *COMMON_NOISE)

    def feed(self, lineno: int, line: str) -> str | None:
        m = FAIRSEQ_INNER.search(line)
        if m:
            step, metrics = self.sink.metrics_from_pairs(FAIRSEQ_KV.findall(m.group(4)))
            metrics["epoch"] = float(m.group(1))
            if not self.sink.emit(lineno, step, metrics, time=leading_time(line)):
                return "no training metric"
            return None
        m = FAIRSEQ_VALID.search(line)
        if m:
            pairs = [(p.group(1), p.group(2)) for p in map(FAIRSEQ_PIPE.match, m.group(2).split("|")) if p]
            step, metrics = self.sink.metrics_from_pairs(pairs)
            metrics = {k.removeprefix("eval_"): v for k, v in metrics.items()}
            if not self.sink.emit(lineno, step, metrics, time=leading_time(line), kind="eval"):
                return "no training metric"
            return None
        return self.classify_noise(line)


class Fairseq(Format):
    name = "fairseq"
    title = "fairseq simple log (| train_inner | epoch 001: 100 / 1021 loss=..., num_updates=...)"
    example = ("2024-05-31 15:45:00 | INFO | train_inner | epoch 001:    100 / 1021 loss=12.835, "
               "nll_loss=12.704, ppl=6670.89, wps=27054.6, num_updates=100, lr=1.25e-05, gnorm=3.112")

    def sniff(self, lines: list[str]) -> int:
        # preamble lines of fairseq (preprocess, Namespace) count too: they come first
        inner = _sniff((FAIRSEQ_INNER, FAIRSEQ_VALID), lines)
        return inner + (_sniff((FAIRSEQ_INFO,), lines) if inner else 0)

    def parser(self, sink: Sink) -> LineParser:
        return _FairseqParser(sink)


# --- torchtitan ------------------------------------------------------------------------------
TITAN = re.compile(r"step:\s*(\d+)\s+(loss:\s*\S+.*)$")
TITAN_PAIR = re.compile(rf"([a-z_ ()]+?):\s*({NONFINITE}(?![A-Za-z])|[-+\d.,eE]+)([A-Za-z%]*)"
                        r"(?:\([^)]*\))?")


class _TitanParser(RegexLineParser):
    noise = COMMON_NOISE

    def feed(self, lineno: int, line: str) -> str | None:
        clean = ANSI.sub("", line)
        m = TITAN.search(clean)
        if not m:
            return self.classify_noise(clean)
        pairs = [(k.strip(), v + u) for k, v, u in TITAN_PAIR.findall(m.group(2))]
        _, metrics = self.sink.metrics_from_pairs(pairs)
        t = leading_time(clean.split("] ", 1)[-1]) or leading_time(clean)
        if not self.sink.emit(lineno, int(m.group(1)), metrics, time=t):
            return "no training metric"
        return None


class TorchTitan(Format):
    name = "torchtitan"
    title = "torchtitan console (step: N  loss: X  memory: ...  tps: ...), ANSI colours stripped"
    example = ("[titan] 2025-01-08 10:00:00,000 - root - INFO - step: 10  loss:  7.6442  "
               "memory: 39.12GiB(41.18%)  tps: 6,581  mfu: 38.55%")

    def sniff(self, lines: list[str]) -> int:
        return sum(1 for x in lines if TITAN.search(ANSI.sub("", x)))

    def parser(self, sink: Sink) -> LineParser:
        return _TitanParser(sink)


# --- PyTorch Lightning's progress bar (stdout of a run without a logger file) ---------------
# 'Epoch 3:  20%|██        | 20/100 [00:02<00:08,  9.50it/s, v_num=0, train_loss=2.340]', redrawn
# with '\r' on one physical line per epoch; validation bars have no postfix of their own
LIGHTNING_BAR = re.compile(r"Epoch (\d+):\s*\d+%\|[^|]*\|\s*(\d+)/(\d+) \[[^\]]*?(?:it/s|s/it)(?:, (.*))?\]")
LIGHTNING_PAIR = re.compile(r"([A-Za-z_][\w/.\-]*)=([^\s,\]]+)")


class _LightningParser(RegexLineParser):
    """One record per training step seen in the bar (the last redraw of the step); an eval
    metric in the postfix ('val_loss=…', carried on every redraw) only when its value changes."""

    noise = COMMON_NOISE

    def __init__(self, sink: Sink):
        super().__init__(sink)
        self.held: tuple[int, int, dict[str, Value]] | None = None  # line, step, metrics
        self.last_eval: dict[str, Value] = {}

    def finish(self) -> None:
        if self.held is not None:
            lineno, step, metrics = self.held
            evals = {k: v for k, v in metrics.items() if is_eval(k)}
            if evals == self.last_eval:  # unchanged since last emitted: not a new evaluation
                metrics = {k: v for k, v in metrics.items() if not is_eval(k)}
            else:
                self.last_eval = evals
            self.sink.emit(lineno, step, metrics)
            self.held = None

    def feed(self, lineno: int, line: str) -> str | None:
        found = False
        for segment in line.split("\r"):
            m = LIGHTNING_BAR.search(segment)
            if not m or not m.group(4):
                continue
            epoch, done, total = int(m.group(1)), int(m.group(2)), int(m.group(3))
            pairs = [(k, v) for k, v in LIGHTNING_PAIR.findall(m.group(4)) if k != "v_num"]
            _, metrics = self.sink.metrics_from_pairs(pairs)
            if not metrics:
                continue
            metrics["epoch"] = float(epoch)
            step = epoch * total + done
            if self.held is not None and self.held[1] != step:
                self.finish()
            self.held = (lineno, step, metrics)
            found = True
        if found:
            return None
        return self.classify_noise(line.split("\r")[-1])


class Lightning(Format):
    name = "lightning"
    title = "PyTorch Lightning progress bar on stdout (Epoch N: …| b/N [… train_loss=…]), '\\r' redraws"
    example = "Epoch 3:  20%|██        | 20/100 [00:02<00:08,  9.50it/s, v_num=0, train_loss=2.340]"

    def sniff(self, lines: list[str]) -> int:
        return sum(1 for x in lines if any(m.group(4) for m in LIGHTNING_BAR.finditer(x)))

    def parser(self, sink: Sink) -> LineParser:
        return _LightningParser(sink)
