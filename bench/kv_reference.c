/* The compiled reference for bench/parse_speed.py: a key=value log read in C, single-threaded.
 * The whole file is read into memory; on each line every 'key=value' (or 'key~value') pair, the
 * key a run of [A-Za-z0-9_/.-] starting with a letter or '_', is looked up among the keys seen so
 * far (linear search, at most 64) and the decimal number its value starts with is put in that
 * key's column (NaN where it starts with none: a list '[..]'). No timestamps, units, lists, eval
 * records or line accounting: the least a reader of these lines does, as fast as plain C does it.
 *
 *     cc -O2 -o kv_reference kv_reference.c -lm && ./kv_reference FILE
 * prints: lines, pairs, keys, and the sum of the 'loss' column (a check that it read them). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_KEYS 64

static unsigned char key_start[256], key_char[256];

static void classes(void) {
    for (int c = 0; c < 256; c++) {
        key_start[c] = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
        key_char[c] = key_start[c] || (c >= '0' && c <= '9') || c == '/' || c == '.' || c == '-';
    }
}

/* A decimal number at s ('-1.5e-3', '32', '.5'), its end in *end (s where none): digits into an
 * integer mantissa, scaled by a power of ten (as fast parsers do; not always the nearest double,
 * which strtod guarantees at about twice the cost) */
static double number(const char *s, const char **end) {
    static const double pow10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                                   1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    const char *p = s;
    int neg = 0, digits = 0, scale = 0;
    unsigned long long m = 0;
    if (*p == '-' || *p == '+') neg = *p++ == '-';
    for (; *p >= '0' && *p <= '9'; p++, digits++) if (digits < 19) m = m * 10 + (unsigned)(*p - '0'); else scale++;
    if (*p == '.') for (p++; *p >= '0' && *p <= '9'; p++, digits++) if (digits < 19) { m = m * 10 + (unsigned)(*p - '0'); scale--; }
    if (!digits) { *end = s; return NAN; }
    if (*p == 'e' || *p == 'E') {
        const char *q = p + 1;
        int eneg = 0, e = 0;
        if (*q == '-' || *q == '+') eneg = *q++ == '-';
        if (*q >= '0' && *q <= '9') {
            for (; *q >= '0' && *q <= '9'; q++) if (e < 10000) e = e * 10 + (*q - '0');
            scale += eneg ? -e : e;
            p = q;
        }
    }
    *end = p;
    double v = (double)m;
    if (scale < 0) v = -scale <= 22 ? v / pow10[-scale] : v * pow(10.0, scale);
    else if (scale > 0) v = scale <= 22 ? v * pow10[scale] : v * pow(10.0, scale);
    return neg ? -v : v;
}

static double *column(size_t cap) {
    double *c = malloc(cap * sizeof(double));
    for (size_t i = 0; i < cap; i++) c[i] = NAN;
    return c;
}

int main(int argc, char **argv) {
    classes();
    if (argc != 2) { fprintf(stderr, "usage: %s FILE\n", argv[0]); return 2; }
    FILE *f = fopen(argv[1], "rb");
    if (!f) { perror(argv[1]); return 2; }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc(size + 1);
    if (!buf || fread(buf, 1, size, f) != (size_t)size) { fprintf(stderr, "cannot read\n"); return 2; }
    buf[size] = '\0';
    fclose(f);

    char keys[MAX_KEYS][64];
    size_t key_len[MAX_KEYS];
    double *cols[MAX_KEYS];
    size_t cap = 1 << 20, nkeys = 0, lines = 0, pairs = 0;
    for (int k = 0; k < MAX_KEYS; k++) cols[k] = NULL;

    char *p = buf, *end = buf + size;
    while (p < end) {
        char *eol = memchr(p, '\n', end - p);
        if (!eol) eol = end;
        *eol = '\0';
        if (lines >= cap) {  /* (columns start as NaN: a key a line lacks stays NaN there) */
            for (size_t k = 0; k < nkeys; k++) {
                cols[k] = realloc(cols[k], 2 * cap * sizeof(double));
                for (size_t i = cap; i < 2 * cap; i++) cols[k][i] = NAN;
            }
            cap *= 2;
        }
        for (char *q = p; q < eol; q++) {
            if (*q != '=' && *q != '~') continue;
            char *k0 = q;
            while (k0 > p && key_char[(unsigned char)k0[-1]]) k0--;
            while (k0 < q && !key_start[(unsigned char)*k0]) k0++;
            size_t len = (size_t)(q - k0);
            if (len == 0 || len >= 64) continue;
            size_t k = 0;
            while (k < nkeys && !(key_len[k] == len && memcmp(keys[k], k0, len) == 0)) k++;
            if (k == nkeys) {
                if (nkeys == MAX_KEYS) continue;
                memcpy(keys[k], k0, len);
                keys[k][len] = '\0';
                key_len[k] = len;
                cols[k] = column(cap);
                nkeys++;
            }
            const char *stop;
            double v = number(q + 1, &stop);
            if (stop != q + 1) cols[k][lines] = v;
            pairs++;
        }
        lines++;
        p = eol + 1;
    }
    double loss = 0.0;
    for (size_t k = 0; k < nkeys; k++)
        if (strcmp(keys[k], "loss") == 0)
            for (size_t i = 0; i < lines; i++)
                if (!isnan(cols[k][i])) loss += cols[k][i];
    printf("%zu lines, %zu pairs, %zu keys, loss sum %.6f\n", lines, pairs, nkeys, loss);
    return 0;
}
