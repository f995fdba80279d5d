"""Gradient-boosting evaluation logs: one line per boosting round, each data set's metrics on it.

    XGBoost    [12]\ttrain-logloss:0.21352\teval-logloss:0.25731      (sklearn API: validation_0-…)
    LightGBM   [12]\ttraining's binary_logloss: 0.2135\tvalid_1's binary_logloss: 0.2573
    CatBoost   12:\tlearn: 0.2135200\ttest: 0.2573100\tbest: 0.2573100 (12)\ttotal: 1.2s\tremaining: 8.8s

The round is the step. A data set named for training (train, training, learn, dtrain) gives the
training metrics, its first loss-type metric (logloss, rmse, l2, …; CatBoost's 'learn' value is the
loss it optimises) the loss; every other set is evaluated (the first set's loss-type metric the eval
loss, a later set's metrics named after it). CatBoost's 'best' is the best so far and is not read.
LightGBM's '[LightGBM] [Warning] No further splits with positive gain, best gain: -inf' is a message
of the library, never a metric."""

from __future__ import annotations

import re

from losslens.logs.base import COMMON_NOISE, Format, LineParser, RegexLineParser, count_matching, whole
from losslens.logs.names import NUMERIC, parse_number, snake
from losslens.logs.sink import Sink, Value

XGB = re.compile(rf"^\s*\[(\d+)\]((?:\t[\w.]+-[\w@.\-]+:{NUMERIC})+)\s*$")
XGB_PAIR = re.compile(rf"\t([\w.]+?)-([\w@.\-]+):({NUMERIC})")
LGB = re.compile(rf"^\s*\[(\d+)\]((?:\t[\w.]+'s [\w@.\-]+: {NUMERIC})+)\s*$")
LGB_PAIR = re.compile(rf"\t([\w.]+)'s ([\w@.\-]+): ({NUMERIC})")
CATBOOST = re.compile(rf"^\s*(\d+):((?:\t(?:learn|test\d*|eval\w*): {NUMERIC})+)(?:\tbest: .*)?"
                      rf"(?:\ttotal: [^\t]+)?(?:\tremaining: [^\t]+)?\s*$")  # ('1m 5s', '78.3ms', '0us')
# LightGBM's 'Early stopping, best iteration is:' / 'Did not meet early stopping. Best iteration is:'
# (older XGBoost: 'Stopping. Best iteration:'), then the best round's line again
BEST = re.compile(r"^\s*(?:Early stopping, best|Did not meet early stopping\. Best) iteration is:"
                  r"|^\s*Stopping\. Best iteration:")
CB_PAIR = re.compile(rf"\t(learn|test\d*|eval\w*): ({NUMERIC})")

TRAIN_SETS = frozenset({"train", "training", "learn", "dtrain", "train_set"})
# metrics that are a loss (lower is better and the objective's own value), lower-cased
LOSSES = frozenset({"logloss", "mlogloss", "binary_logloss", "multi_logloss", "cross_entropy", "xentropy",
                    "rmse", "mse", "mae", "l1", "l2", "l2_root", "rmsle", "huber", "fair", "poisson",
                    "gamma", "gamma-deviance", "tweedie", "quantile", "mape", "multiclass", "crossentropy",
                    "multiclassova", "lambdamart", "yetirank", "loss"})


class _BoostingParser(RegexLineParser):
    noise = ((re.compile(r"^\s*(?:\[LightGBM\] |Training until validation scores|Stopped|Will train until|"
                         r"bestTest = |bestIteration = |Shrink model to first|Learning rate set to )"),
              "the library's message"),
             *COMMON_NOISE)

    def __init__(self, sink: Sink):
        super().__init__(sink)
        self.first_set: str | None = None  # the first evaluated set (its loss the eval loss)
        self.loss: tuple[str, str] | None = None  # (set, metric) read as the loss
        self.eval_loss: tuple[str, str] | None = None
        self.best_next = False  # the next round line repeats the best round

    def feed(self, lineno: int, line: str) -> str | None:
        text = line.rstrip("\r\n")
        if BEST.search(text):
            self.best_next = True  # LightGBM's early stopping: the best round is printed again after it
            return None
        best, self.best_next = self.best_next, False
        if (m := XGB.match(text)) is not None:
            pairs = XGB_PAIR.findall(m.group(2))
        elif (m := LGB.match(text)) is not None:
            pairs = LGB_PAIR.findall(m.group(2))
        elif (m := CATBOOST.match(text)) is not None:
            pairs = [(data, "loss", value) for data, value in CB_PAIR.findall(m.group(2))]
        else:
            return self.classify_noise(line)
        if best:
            return "the best round, printed again"
        metrics: dict[str, Value | None] = {}
        for data, metric, value in pairs:
            name = self._column(data, metric)
            metrics.setdefault(name, parse_number(value))
            self.sink.names.setdefault(name, f"{data}-{metric}")
        if not self.sink.emit(lineno, whole(m.group(1)), metrics):
            return "no training metric"
        return None

    def _column(self, data: str, metric: str) -> str:
        """'train'/'logloss' → 'loss' (the first loss-type metric of a training set) or 'logloss';
        the first evaluated set's → 'eval_loss' or 'eval_auc', a later set's → 'eval_valid_1_logloss'."""
        m = metric.lower()
        if data.lower() in TRAIN_SETS:
            if self.loss is None and m in LOSSES:
                self.loss = (data, metric)
            return "loss" if self.loss == (data, metric) else snake(m)
        if self.first_set is None:
            self.first_set = data
        if data != self.first_set:
            return f"eval_{snake(data)}_{snake(m)}"
        if self.eval_loss is None and m in LOSSES:
            self.eval_loss = (data, metric)
        return "eval_loss" if self.eval_loss == (data, metric) else f"eval_{snake(m)}"


class Boosting(Format):
    """--format boosting: XGBoost / LightGBM / CatBoost per-round evaluation lines."""
    name = "boosting"
    title = "gradient boosting: XGBoost, LightGBM and CatBoost per-round evaluation lines"
    example = "[12]\ttrain-logloss:0.21352\teval-logloss:0.25731"

    def sniff(self, lines: list[str]) -> int:
        return count_matching((XGB, LGB, CATBOOST), [x.rstrip("\r\n") for x in lines])

    def parser(self, sink: Sink) -> LineParser:
        return _BoostingParser(sink)
