"""numba kernels of the skeleton reader (see ``skeleton``, which alone imports this module, and only
where numba is installed).

A line's skeleton is its text with every number taken out: a number starts at a digit (or a sign
before one) that no letter, digit, '_' or '.' comes right before, and runs as a decimal with an
optional exponent ('-1.25e-05'), and its sign stays in the skeleton (a parser may read a
negative sentinel, nanoGPT's 'mfu -100.00%', otherwise), as does every space (a parser may read
a key with two spaces in it, or a tab, otherwise; a padded number's width makes a skeleton of its
own). Lines that a format prints from one format string share a skeleton, and their numbers sit at
the same places.
``scan`` hashes each line's skeleton and reads its numbers; a number is read only where the reading
is exact (Clinger's fast path: at most 18 significant digits, leading zeros not counted, an
integer below 2**53, a power of ten within 1e±22), else it is NaN and a row that needs it goes to
the per-line parser.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from losslens.logs.formats.kv.kernels import _stamp, rank_prefixed

NL, TAB, CR, SP, COMMA, DOT = 10, 9, 13, 32, 44, 46
MINUS, PLUS, ZERO, NINE, E_LO, E_UP, UNDER = 45, 43, 48, 57, 101, 69, 95
COLON = 58
POW10 = np.array([10.0 ** k for k in range(23)])
FNV_OFFSET = np.uint64(14695981039346656037)
FNV_PRIME = np.uint64(1099511628211)
NUMBER_MARK = np.uint64(0x1F)  # what a number leaves in the hash (a byte no line of a chunk holds)


@njit(cache=True, nogil=True)
def _digit(c) -> bool:
    return ZERO <= c <= NINE


@njit(cache=True, nogil=True)
def _wordish(c) -> bool:
    """A byte a number may not follow: a letter, a digit, '_' or '.'."""
    return _digit(c) or (65 <= c <= 90) or (97 <= c <= 122) or c == UNDER or c == DOT


@njit(cache=True, nogil=True)
def _mix(h, c):
    return (h ^ np.uint64(c)) * FNV_PRIME


@njit(cache=True, nogil=True)
def _number(buf, a, b):
    """The number that starts at buf[a] (a sign or a digit): (where it ends, its value or NaN
    where the reading would not be exact, whether it is a plain run of digits)."""
    i = a
    neg = False
    if buf[i] == MINUS or buf[i] == PLUS:
        neg = buf[i] == MINUS
        i += 1
    mant = np.int64(0)
    digits = 0  # significant digits: from the first that is not a zero
    while i < b and _digit(buf[i]):
        if digits < 19:
            mant = mant * 10 + (buf[i] - ZERO)
        digits += mant > 0
        i += 1
    plain = True
    frac = 0
    if i < b and buf[i] == DOT:
        plain = False
        i += 1
        while i < b and _digit(buf[i]):
            if digits < 19:
                mant = mant * 10 + (buf[i] - ZERO)
            digits += mant > 0
            frac += 1
            i += 1
    exp = 0
    if i + 1 < b and (buf[i] == E_LO or buf[i] == E_UP):
        j = i + 1
        eneg = False
        if buf[j] == MINUS or buf[j] == PLUS:
            eneg = buf[j] == MINUS
            j += 1
        if j < b and _digit(buf[j]):
            plain = False
            e = 0
            while j < b and _digit(buf[j]):
                if e < 10000:
                    e = e * 10 + (buf[j] - ZERO)
                j += 1
            exp = -e if eneg else e
            i = j
    if digits > 18 or mant > 9007199254740992:
        return i, np.nan, plain
    e10 = exp - frac
    if mant == 0:
        value = 0.0
    elif e10 > 22 or e10 < -22:
        return i, np.nan, plain
    elif e10 >= 0:
        value = float(mant) * POW10[e10]
    else:
        value = float(mant) / POW10[-e10]
    return i, (-value if neg else value), plain


@njit(cache=True, nogil=True)
def _scan_row(buf, a, b, r, width, hashes, counts, values, starts, plain, usable, blank, ranked):
    ranked[r] = rank_prefixed(buf, a, b)
    h = FNV_OFFSET
    k = 0
    white = True
    last_end = -1  # where the last number ended
    i = a
    while i < b:
        c = buf[i]
        if c >= 128 or c == 0 or c == CR or c == NUMBER_MARK:
            usable[r] = False
            return
        white = white and (c == SP or c == TAB or c == NL or c == 11 or c == 12)
        starts_number = _digit(c) or ((c == MINUS or c == PLUS) and i + 1 < b and _digit(buf[i + 1]))
        if starts_number and (i == a or not _wordish(buf[i - 1])):
            if k == width:
                usable[r] = False
                return
            end, value, whole = _number(buf, i, b)
            values[r, k] = value
            starts[r, k] = i
            plain[r, k] = whole
            h = _mix(h, NUMBER_MARK)
            if c == MINUS or c == PLUS:  # a sign is part of the skeleton (a sentinel such as -100)
                h = _mix(h, c)
            if i == last_end + 1 and buf[i - 1] == COMMA and whole:
                # a thousands group ('31,042'): its width is part of the skeleton
                h = _mix(h, end - i)
            last_end = end
            k += 1
            i = end
            continue
        h = _mix(h, c)
        i += 1
    hashes[r] = _mix(h, k)
    counts[r] = k
    blank[r] = white


@njit(cache=True, nogil=True, parallel=True)
def scan(buf, line_starts, line_ends, width):
    """Each line's skeleton hash, how many numbers it holds (at most ``width``), their values,
    where each starts in ``buf`` and whether it is a plain run of digits; whether the line can
    be read here (ASCII, no NUL or carriage return, at most ``width`` numbers), whether it
    is blank (ASCII whitespace only) and whether it starts with a torchrun rank prefix."""
    n = len(line_starts)
    hashes = np.zeros(n, dtype=np.uint64)
    counts = np.zeros(n, dtype=np.int32)
    values = np.full((n, width), np.nan)
    starts = np.zeros((n, width), dtype=np.int64)
    plain = np.zeros((n, width), dtype=np.bool_)
    usable = np.ones(n, dtype=np.bool_)
    blank = np.zeros(n, dtype=np.bool_)
    ranked = np.zeros(n, dtype=np.bool_)
    for r in prange(n):
        _scan_row(buf, line_starts[r], line_ends[r], r, width, hashes, counts, values, starts, plain,
                  usable, blank, ranked)
    return hashes, counts, values, starts, plain, usable, blank, ranked


@njit(cache=True, nogil=True, parallel=True)
def stamps(buf, at, ends):
    """The wall time written at each ``at`` (key=value's ``_stamp``: '2024-05-31 15:45:00' or
    with a 'T', up to six digits of a fraction, as ``base.leading_time`` reads it) in microseconds
    since 1970 (naive), and whether one is there and is a real date and time."""
    n = len(at)
    micros = np.zeros(n, dtype=np.int64)
    ok = np.zeros(n, dtype=np.bool_)
    for r in prange(n):
        us, found = _stamp(buf, at[r], ends[r])
        if found == 1:
            micros[r], ok[r] = us, True
    return micros, ok
