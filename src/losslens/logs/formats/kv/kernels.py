"""numba kernels of the key=value template reader (see ``kv.fast``, which alone imports this
module, and only where numba is installed). Each mirrors a step of ``kv.columns``: the cells a line
splits into at '=' and '~', the checks that it follows a template, each value's text and its
first reading. Numbers are read only where the reading is exact: a decimal of at most 18 digits
whose integer is below 2**53 and whose power of ten is within 1e±22 (Clinger's fast path: both are
exact doubles, so one multiplication or division rounds as a correct parser does); anything else
leaves the line to the per-line parser. A template's rows are read on all cores (``prange``)."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

# ASCII bytes
NL, TAB, VT, FF, CR, SP = 10, 9, 11, 12, 13, 32
EQ, TILDE, LBR, RBR, LPAR, RPAR = 61, 126, 91, 93, 40, 41
PIPE, COMMA, SEMI, DOT, MINUS, PLUS = 124, 44, 59, 46, 45, 43
ZERO, NINE, E_LO, E_UP, T_UP, COLON = 48, 57, 101, 69, 84, 58
POW10 = np.array([10.0 ** k for k in range(23)])
TOKS = np.frombuffer(b"tok/s", dtype=np.uint8).copy()


@njit(cache=True, nogil=True)
def _space(c: int) -> bool:
    return c == SP or c == TAB or c == VT or c == FF or c == NL or c == CR


@njit(cache=True, nogil=True)
def _value_end(c: int) -> bool:
    """kv.columns.VALUE_END: whitespace, '|', ',', ';', brackets, parentheses."""
    return _space(c) or c == PIPE or c == COMMA or c == SEMI or c == LBR or c == RBR or \
        c == LPAR or c == RPAR


@njit(cache=True, nogil=True)
def blanks(buf, starts, ends):
    """Whether each line is blank (ASCII whitespace only), whether some line's blankness needs
    Unicode (non-ASCII bytes and no other character: the caller then reads the chunk with
    polars), and whether each line starts behind a torchrun rank prefix (``rank_prefixed``)."""
    n = len(starts)
    blank = np.zeros(n, dtype=np.bool_)
    ranked = np.zeros(n, dtype=np.bool_)
    unsure = False
    for r in range(n):
        ranked[r] = rank_prefixed(buf, starts[r], ends[r])
        white, high = True, False
        for j in range(starts[r], ends[r]):
            c = buf[j]
            if c >= 128:
                high = True
            elif not _space(c):
                white = False
                break
        blank[r] = white and not high
        if white and high:
            unsure = True
    return blank, unsure, ranked


@njit(cache=True, nogil=True)
def rank_prefixed(buf, i, end):
    """Whether the line buf[i:end] starts with a torchrun rank prefix as ``columnar._RANK_LINE``
    matches it: '[ \\t\\f\\v]*\\[(?:[A-Za-z_]+)?\\d+\\]:' ('[rank3]:', '  [7]:'). The skeleton
    reader's scan uses it too."""
    while i < end and (buf[i] == SP or buf[i] == TAB or buf[i] == FF or buf[i] == VT):
        i += 1
    if i >= end or buf[i] != LBR:
        return False
    i += 1
    while i < end and ((65 <= buf[i] <= 90) or (97 <= buf[i] <= 122) or buf[i] == 95):
        i += 1
    digits = i
    while i < end and ZERO <= buf[i] <= NINE:
        i += 1
    return digits < i and i + 1 < end and buf[i] == RBR and buf[i + 1] == COLON


@njit(cache=True, nogil=True)
def _run(buf, i, b, value, stop):
    """The run of digits from buf[i] (up to ``stop``) appended to ``value``: (where it ends, the
    value)."""
    while i < stop:
        d = np.int64(buf[i]) - ZERO
        if d < 0 or d > 9:
            break
        value = value * 10 + d
        i += 1
    return i, value


@njit(cache=True, nogil=True)
def _decimal(buf, a, b, integer):
    """The number buf[a:b] spells ('-?(\\d+\\.?\\d*|\\.\\d+)([eE][-+]?\\d+)?'; with ``integer``,
    '-?\\d+' only), or NaN where it spells none or its reading would not be exact (more than 18
    digits, leading zeros counted, or an integer part past 2**53)."""
    if a >= b:
        return np.nan
    i = a + 1 if buf[a] == MINUS else a
    s = i
    i, mant = _run(buf, i, b, 0, b)
    digits, frac = i - s, 0
    if i < b and buf[i] == DOT:
        if integer:
            return np.nan
        i += 1
        f = i
        i, mant = _run(buf, i, b, mant, b)
        frac = i - f
        digits += frac
    if digits == 0 or digits > 18 or mant > 9007199254740992:
        return np.nan
    exp = 0
    if i < b and (buf[i] == E_LO or buf[i] == E_UP):
        if integer:
            return np.nan
        i += 1
        eneg = False
        if i < b and (buf[i] == MINUS or buf[i] == PLUS):
            eneg = buf[i] == MINUS
            i += 1
        if i >= b:
            return np.nan
        e0 = i
        i, exp = _run(buf, i, b, 0, min(b, i + 4))
        if i == e0:
            return np.nan
        if eneg:
            exp = -exp
    if i != b:
        return np.nan
    e = exp - frac
    if mant == 0:
        value = 0.0
    elif e > 22 or e < -22:
        return np.nan
    elif e >= 0:
        value = float(mant) * POW10[e]
    else:
        value = float(mant) / POW10[-e]
    return -value if buf[a] == MINUS else value


@njit(cache=True, nogil=True)
def _ends_with(buf, a, b, pat, pa, pb):
    """buf[a:b] ends with pat[pa:pb]."""
    k = pb - pa
    if b - a < k:
        return False
    for j in range(k):
        if buf[b - k + j] != pat[pa + j]:
            return False
    return True


@njit(cache=True, nogil=True)
def _rate(buf, a, b):
    """kv.patterns.TOKRATE's first match in buf[a:b] ('(32.1Ktok/s)'), as tokens per second; NaN
    for no match; -1.0 for a match whose number is not read exactly here."""
    for p in range(a, b):
        if buf[p] != LPAR:
            continue
        i = p + 1
        while i < b and _space(buf[i]):
            i += 1
        s = i
        if i < b and (buf[i] == MINUS or buf[i] == PLUS):
            i += 1
        d = i
        while i < b and ZERO <= buf[i] <= NINE:
            i += 1
        ok = i > d
        if i < b and buf[i] == DOT:
            i += 1
            f = i
            while i < b and ZERO <= buf[i] <= NINE:
                i += 1
            ok = ok or i > f
        if not ok:
            continue
        if i < b and (buf[i] == E_LO or buf[i] == E_UP):
            j = i + 1
            if j < b and (buf[j] == MINUS or buf[j] == PLUS):
                j += 1
            if j < b and ZERO <= buf[j] <= NINE:
                while j < b and ZERO <= buf[j] <= NINE:
                    j += 1
                i = j
        e = i
        while i < b and _space(buf[i]):
            i += 1
        scale = 1.0
        if i < b and buf[i] == 75:  # K
            scale, i = 1e3, i + 1
        elif i < b and buf[i] == 77:  # M
            scale, i = 1e6, i + 1
        elif i < b and buf[i] == 71:  # G
            scale, i = 1e9, i + 1
        if i + 5 > b:
            continue
        hit = True
        for j in range(5):
            if buf[i + j] != TOKS[j]:
                hit = False
        if not hit:
            continue
        i += 5
        while i < b and _space(buf[i]):
            i += 1
        if i >= b or buf[i] != RPAR:
            continue
        if buf[s] == PLUS:
            return -1.0
        v = _decimal(buf, s, e, False)
        return -1.0 if np.isnan(v) else v * scale
    return np.nan


@njit(cache=True, nogil=True)
def _digits(buf, a, k):
    """The k digits at buf[a:a + k] as a number; -1 where one is not a digit."""
    v = 0
    for j in range(a, a + k):
        c = buf[j]
        if c < ZERO or c > NINE:
            return -1
        v = v * 10 + (c - ZERO)
    return v


@njit(cache=True, nogil=True)
def _days(y, m, d):
    """Days from 1970-01-01 to a proleptic Gregorian date."""
    y -= m <= 2
    era = (y if y >= 0 else y - 399) // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


@njit(cache=True, nogil=True)
def _stamp(buf, a, b):
    """base.TIMESTAMP's time at buf[a:b]'s start as microseconds (what columnar.times reads);
    (0, 0) for none, (0, -1) for one this kernel leaves to the parser (a date or time out of
    range)."""
    i = a + 1 if a < b and buf[a] == LBR else a
    if i + 19 > b:
        return 0, 0
    y, mo, d = _digits(buf, i, 4), _digits(buf, i + 5, 2), _digits(buf, i + 8, 2)
    h, mi, s = _digits(buf, i + 11, 2), _digits(buf, i + 14, 2), _digits(buf, i + 17, 2)
    if y < 0 or mo < 0 or d < 0 or h < 0 or mi < 0 or s < 0 or buf[i + 4] != MINUS or \
            buf[i + 7] != MINUS or not (buf[i + 10] == SP or buf[i + 10] == T_UP) or \
            buf[i + 13] != COLON or buf[i + 16] != COLON:
        return 0, 0
    leap = y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)
    month_days = (31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
    if y < 1 or mo < 1 or mo > 12 or d < 1 or d > month_days[mo - 1] or h > 23 or mi > 59 or s > 59:
        return 0, -1
    us = ((_days(y, mo, d) * 24 + h) * 60 + mi) * 60 + s
    us *= 1_000_000
    j = i + 19
    if j + 1 < b and (buf[j] == DOT or buf[j] == COMMA) and ZERO <= buf[j + 1] <= NINE:
        frac, k = 0, 0
        while k < 6 and j + 1 + k < b and ZERO <= buf[j + 1 + k] <= NINE:
            frac = frac * 10 + (buf[j + 1 + k] - ZERO)
            k += 1
        while k < 6:
            frac *= 10
            k += 1
        us += frac
    return us, 1


@njit(cache=True, nogil=True)
def _row(r, buf, starts, ends, pending, keys, key_off, fixed, fixed_off,
         varying, lead_len, lists, steps, units, unit_off, scales, rate_cell, check_rate, before, m,
         fit, values, flat, cap_off, counts, tok, micros, timed):
    """Row ``r`` of ``read_template``."""
    a, b = starts[r], ends[r]
    # exactly m separators, and every byte ASCII
    ok = pending[r]
    seps = np.empty(m, dtype=np.int64)
    if ok:
        k = 0
        for i in range(a, b):
            c = buf[i]
            if c == EQ or c == TILDE:
                if k == m:
                    ok = False
                    break
                seps[k] = i
                k += 1
            elif c >= 128:
                ok = False
                break
        ok = ok and k == m
    if ok and check_rate:  # no 'tok/s' in the cells before the rate cell (all of them: none)
        stop = b if before > m else seps[before - 1]
        for i in range(a, stop - 4):
            if buf[i] == 116 and buf[i + 1] == 111 and buf[i + 2] == 107 and buf[i + 3] == 47 \
                    and buf[i + 4] == 115:
                ok = False
                break
    li = 0
    if ok:
        for i in range(m):
            # cell i ends with the key, behind the template's text (cell 0: is the key)
            ca = a if i == 0 else seps[i - 1] + 1
            cb = seps[i]
            if i == 0 and lead_len[0] == 0:
                if cb - ca != key_off[1] - key_off[0] or \
                        not _ends_with(buf, ca, cb, keys, key_off[0], key_off[1]):
                    ok = False
                    break
            elif not (_ends_with(buf, ca, cb, keys, key_off[i], key_off[i + 1]) and
                      _ends_with(buf, ca, cb - (key_off[i + 1] - key_off[i]), fixed,
                                 fixed_off[i], fixed_off[i + 1])):
                ok = False
                break
            # value i: in cell i + 1
            va = seps[i] + 1
            vb = b if i + 1 == m else seps[i + 1]
            if i + 1 < m and not lists[i] and not varying[i + 1]:
                vb -= lead_len[i + 1] + key_off[i + 2] - key_off[i + 1]
                if vb < va:
                    ok = False
                    break
            elif lists[i]:
                if va >= vb or buf[va] != LBR:
                    ok = False
                    break
                j = va
                while j < vb and buf[j] != RBR:
                    j += 1
                if j == vb:
                    ok = False
                    break
                vb = j + 1
            else:
                j = va
                while j < vb and not _value_end(buf[j]):
                    j += 1
                if j == va and j < vb:
                    ok = False
                    break
                vb = j
            if lists[i]:
                # '[a, b, c]': parts at ', ', each a plain number
                base = cap_off[r]
                cnt = 0
                p = va + 1
                end = vb - 1
                if p == end:
                    ok = False  # '[]': the polars path's reading decides
                    break
                while True:
                    q = p
                    while q < end and not (buf[q] == COMMA and q + 1 < end and buf[q + 1] == SP):
                        q += 1
                    v = _decimal(buf, p, q, False)
                    if np.isnan(v):
                        ok = False
                        break
                    flat[li, base + cnt] = v
                    cnt += 1
                    if q >= end:
                        break
                    p = q + 2
                if not ok:
                    break
                counts[li, r] = cnt
                li += 1
                continue
            v = _decimal(buf, va, vb, steps[i])
            if np.isnan(v) and not steps[i] and unit_off[i + 1] > unit_off[i]:
                # a number followed by the unit the template was written with
                if _ends_with(buf, va, vb, units, unit_off[i], unit_off[i + 1]):
                    v = _decimal(buf, va, vb - (unit_off[i + 1] - unit_off[i]), False) * scales[i]
            if np.isnan(v):
                ok = False
                break
            values[r, i] = v
    if ok and rate_cell >= 0:
        ra = a if rate_cell == 0 else seps[rate_cell - 1] + 1
        rb = b if rate_cell == m else seps[rate_cell]
        t = _rate(buf, ra, rb)
        if t == -1.0:
            ok = False
        else:
            tok[r] = t
    if ok:
        us, state = _stamp(buf, a, seps[0])
        if state == -1:
            ok = False
        elif state == 1:
            micros[r], timed[r] = us, True
    if ok:
        fit[r] = True
    else:
        for i in range(m):
            values[r, i] = np.nan
        tok[r] = np.nan
        for j in range(counts.shape[0]):
            counts[j, r] = 0


@njit(cache=True, nogil=True, parallel=True)
def read_template(buf, starts, ends, pending, keys, key_off, fixed, fixed_off,
                  varying, lead_len, lists, steps, units, unit_off, scales, rate_cell, check_rate, before,
                  cap_off, capacity):
    """kv.columns._template_rows for one template over a chunk's lines (``pending`` ones), a row a
    thread at a time: whether each follows it and is read exactly here, each key's first reading
    (NaN: none), each list key's values (row r's from ``cap_off[r]``, ``counts[k, r]`` of them),
    the token rate and the leading time (see ``kv.fast``). A row holding a byte outside ASCII is
    no fit. ``capacity``: the values all lists of a key can hold (a row's list holds at most one
    more than the row's commas)."""
    n, m = len(starts), len(key_off) - 1
    n_lists = 0
    for i in range(m):
        n_lists += lists[i]
    fit = np.zeros(n, dtype=np.bool_)
    values = np.full((n, m), np.nan)
    flat = np.empty((max(n_lists, 1), capacity))
    counts = np.zeros((max(n_lists, 1), n), dtype=np.int64)
    tok = np.full(n, np.nan)
    micros = np.zeros(n, dtype=np.int64)
    timed = np.zeros(n, dtype=np.bool_)
    for r in prange(n):
        _row(r, buf, starts, ends, pending, keys, key_off, fixed, fixed_off,
             varying, lead_len, lists, steps, units, unit_off, scales, rate_cell, check_rate, before, m,
             fit, values, flat, cap_off, counts, tok, micros, timed)
    return fit, values, flat, counts, tok, micros, timed


@njit(cache=True, nogil=True)
def dense_lists(flat, at, fit, w):
    """Each fitting row's ``w`` list values (from ``flat[at[r]]`` on) as row r of an (n, w)
    array; zeros on the other rows (``kv.fast._lists``: where every fitting row holds ``w``)."""
    n = len(at)
    out = np.zeros((n, w))
    for r in range(n):
        if fit[r]:
            for j in range(w):
                out[r, j] = flat[at[r] + j]
    return out
