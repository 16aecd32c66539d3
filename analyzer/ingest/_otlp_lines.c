/* The native fast path of the OTLP JSON lines reader (analyzer.ingest.otlp_json).

   parse(lines, numbers) reads each line (one ExportTraceServiceRequest in OTLP/JSON) straight
   into Arrow buffers: no Python object per span or attribute. It accepts a line only when every
   part of it has one reading the robust path (analyzer.ingest.otlp_objects) would also give;
   any other line (snake_case field names, legacy instrumentation library, an unreadable id or
   time, a value of an odd type, duplicate fields, deep nesting, invalid JSON...) is refused
   whole, rolled back, and left to the robust path by the caller. Arrays, key-value lists and
   bytes that are not plain are returned as their raw JSON text with a "pending" mark, for the
   caller to convert with the robust path's own function.

   JSON escapes and UTF-8 are checked here: a line with a byte sequence that is not UTF-8 in a
   string is refused (outside strings any byte over 0x7F is a syntax error), so the caller need
   not check the lines beforehand. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define MAX_DEPTH 32 /* deeper values are left to the robust path */

static locale_t c_locale; /* numbers are read the same whatever the process locale */

/* --- growable buffers and Arrow-style columns ------------------------------------------- */

typedef struct {
    char *p;
    Py_ssize_t len, cap;
} Buf;

static inline int buf_reserve(Buf *b, Py_ssize_t extra) {
    if (b->len + extra <= b->cap && b->p) return 0;
    Py_ssize_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra) cap *= 2;
    char *p = realloc(b->p, (size_t)cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

enum { C_STR, C_I64, C_F64, C_BOOL, C_U8, C_I32, C_LIST };

/* One column: validity bitmap, offsets (strings and lists, int32) and data. */
typedef struct {
    const char *name;
    int type;
    Buf valid, off, data;
    Py_ssize_t n, nulls;
} Col;

typedef struct {
    Py_ssize_t n, nulls, data_len;
} Mark;

/* The attribute columns of one kind of owner (spans, resources, events, links). */
typedef struct {
    Col key, s, i, f, b, j;
    Col pend_index, pend_kind; /* json values the caller converts */
} Pool;

typedef struct { /* a scanned JSON token */
    int t;
    const char *s, *e; /* strings: the content between the quotes; others: the whole text */
    int esc;           /* a string with escapes */
    int isint;         /* a number without fraction or exponent */
} Tok;

enum { T_NONE = 0, T_NULL, T_TRUE, T_FALSE, T_NUM, T_STR, T_OBJ, T_ARR };

#define NCOLS 64
#define RES_SEEN 32

/* A resource already listed in this call, by its JSON text (which the lines hold meanwhile). */
typedef struct {
    const char *s;
    Py_ssize_t len;
    uint64_t hash;
    int32_t index;
} Res;

typedef struct {
    const char *p, *end;
    int oom, overflow;
    int64_t line_no;
    /* spans */
    Col trace, span, parent, name, kind, start, stop, code, message, line;
    Col scope_name, scope_version, attrs, events, links;
    Col res_attrs, res_index; /* one list per resource; each span's index into them */
    /* events, links */
    Col ev_time, ev_name, ev_attrs;
    Col lk_trace, lk_span, lk_attrs;
    Pool A, RS, E, L; /* attributes of spans, their resources, events, links */
    Pool R;           /* the current resource's own attributes (not returned) */
    Res res[RES_SEEN]; /* the first resources listed: the same text is listed once */
    int nres;
    Col *all[NCOLS];
    Mark marks[NCOLS];
    int ncols;
    Py_ssize_t spans_read;
} St;

static void col_init(St *st, Col *c, const char *name, int type) {
    memset(c, 0, sizeof *c);
    c->name = name;
    c->type = type;
    if (type == C_STR || type == C_LIST) {
        if (buf_reserve(&c->off, 4) < 0) {
            st->oom = 1;
        } else {
            memset(c->off.p, 0, 4);
            c->off.len = 4;
        }
    }
    st->all[st->ncols++] = c;
}

static void col_free(Col *c) {
    free(c->valid.p);
    free(c->off.p);
    free(c->data.p);
}

/* Bit `i` of the bitmap `b` set to `v`, the bitmap grown as needed. */
static inline void bit_put(St *st, Buf *b, Py_ssize_t i, int v) {
    Py_ssize_t need = i / 8 + 1;
    if (b->len < need) {
        if (buf_reserve(b, need - b->len) < 0) {
            st->oom = 1;
            return;
        }
        memset(b->p + b->len, 0, (size_t)(need - b->len));
        b->len = need;
    }
    unsigned char *byte = (unsigned char *)b->p + i / 8;
    unsigned char bit = (unsigned char)(1u << (i % 8));
    if (v)
        *byte |= bit;
    else
        *byte &= (unsigned char)~bit;
}

static inline void valid_put(St *st, Col *c, int v) {
    bit_put(st, &c->valid, c->n, v);
    c->nulls += !v;
}

static inline int off_put(St *st, Col *c) {
    if (c->data.len > INT32_MAX) {
        st->overflow = 1;
        return -1;
    }
    if (buf_reserve(&c->off, 4) < 0) {
        st->oom = 1;
        return -1;
    }
    int32_t o = (int32_t)c->data.len;
    memcpy(c->off.p + c->off.len, &o, 4);
    c->off.len += 4;
    return 0;
}

/* Strings: `len` bytes written by `fill` (a copy or an unescape) into the data buffer. */
static inline char *str_begin(St *st, Col *c, Py_ssize_t room) {
    if (buf_reserve(&c->data, room) < 0) {
        st->oom = 1;
        return NULL;
    }
    return c->data.p + c->data.len;
}

static inline void str_end(St *st, Col *c, Py_ssize_t written) {
    c->data.len += written;
    if (off_put(st, c) < 0) return;
    valid_put(st, c, 1);
    c->n++;
}

static inline void str_put(St *st, Col *c, const char *s, Py_ssize_t len) {
    char *out = str_begin(st, c, len);
    if (!out) return;
    memcpy(out, s, (size_t)len);
    str_end(st, c, len);
}

static inline void null_put(St *st, Col *c) {
    switch (c->type) {
    case C_STR:
        if (off_put(st, c) < 0) return;
        break;
    case C_I64:
    case C_F64:
    case C_I32: {
        int size = c->type == C_I32 ? 4 : 8;
        if (buf_reserve(&c->data, size) < 0) {
            st->oom = 1;
            return;
        }
        memset(c->data.p + c->data.len, 0, (size_t)size);
        c->data.len += size;
        break;
    }
    case C_BOOL: bit_put(st, &c->data, c->n, 0); break;
    }
    valid_put(st, c, 0);
    c->n++;
}

static inline void fixed_put(St *st, Col *c, const void *v, int size) {
    if (buf_reserve(&c->data, size) < 0) {
        st->oom = 1;
        return;
    }
    memcpy(c->data.p + c->data.len, v, (size_t)size);
    c->data.len += size;
    valid_put(st, c, 1);
    c->n++;
}

static inline void i64_put(St *st, Col *c, int64_t v) { fixed_put(st, c, &v, 8); }
static inline void f64_put(St *st, Col *c, double v) { fixed_put(st, c, &v, 8); }
static inline void u8_put(St *st, Col *c, uint8_t v) { fixed_put(st, c, &v, 1); }
static inline void i32_put(St *st, Col *c, int32_t v) { fixed_put(st, c, &v, 4); }

static inline void bool_put(St *st, Col *c, int v) {
    bit_put(st, &c->data, c->n, v);
    valid_put(st, c, 1);
    c->n++;
}

/* A list column closes its next list at `total` children so far. */
static inline void list_close(St *st, Col *c, Py_ssize_t total) {
    if (total > INT32_MAX) {
        st->overflow = 1;
        return;
    }
    if (buf_reserve(&c->off, 4) < 0) {
        st->oom = 1;
        return;
    }
    int32_t o = (int32_t)total;
    memcpy(c->off.p + c->off.len, &o, 4);
    c->off.len += 4;
    c->n++;
}

static void mark_all(St *st) {
    for (int k = 0; k < st->ncols; k++) {
        Col *c = st->all[k];
        st->marks[k].n = c->n;
        st->marks[k].nulls = c->nulls;
        st->marks[k].data_len = c->data.len;
    }
}

static void rollback_all(St *st) {
    for (int k = 0; k < st->ncols; k++) {
        Col *c = st->all[k];
        c->n = st->marks[k].n;
        c->nulls = st->marks[k].nulls;
        c->data.len = st->marks[k].data_len;
        if (c->type == C_STR || c->type == C_LIST) c->off.len = 4 * (c->n + 1);
    }
    while (st->nres && st->res[st->nres - 1].index >= st->res_attrs.n) st->nres--;
}

/* --- JSON scanning ------------------------------------------------------------------------ */

#define TRY(x)                                                                                 \
    do {                                                                                       \
        if ((x) < 0) return -1;                                                                \
    } while (0)

static inline void ws(St *st) {
    while (st->p < st->end &&
           (*st->p == ' ' || *st->p == '\t' || *st->p == '\n' || *st->p == '\r'))
        st->p++;
}

static inline int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static inline int hex4(const char *s, unsigned *out) {
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        int d = hexval(s[k]);
        if (d < 0) return -1;
        v = (v << 4) | (unsigned)d;
    }
    *out = v;
    return 0;
}

/* The length of the UTF-8 sequence at p (its first byte over 0x7F) before `end`, 0 if it is
   not one (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF, cut). */
static inline int utf8_sequence(const unsigned char *p, const unsigned char *end) {
    unsigned c = p[0];
    int n;
    unsigned lo = 0x80, hi = 0xBF; /* the range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        return 0;
    }
    if (end - p < n || p[1] < lo || p[1] > hi) return 0;
    for (int k = 2; k < n; k++)
        if ((p[k] & 0xC0) != 0x80) return 0;
    return n;
}

/* A string at st->p (its opening quote): checks escapes (surrogates paired), control chars and
   UTF-8. */
static inline int scan_string(St *st, Tok *t) {
    const char *p = st->p + 1, *end = st->end;
    int esc = 0;
    for (;;) {
#ifdef __SSE2__
        /* 16 bytes at a time to the next quote, backslash, control character or byte over 0x7F
           (the sign bit) */
        const __m128i quote = _mm_set1_epi8('"'), slash = _mm_set1_epi8('\\');
        const __m128i flip = _mm_set1_epi8((char)0x80), low = _mm_set1_epi8((char)(0x20 ^ 0x80));
        while (end - p >= 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)p);
            __m128i special = _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, slash));
            __m128i hit = _mm_or_si128(special, _mm_cmplt_epi8(_mm_xor_si128(v, flip), low));
            int m = _mm_movemask_epi8(hit) | _mm_movemask_epi8(v);
            if (m) {
                p += __builtin_ctz((unsigned)m);
                break;
            }
            p += 16;
        }
#endif
        while (p < end && *p != '"' && *p != '\\' && (unsigned char)*p >= 0x20 &&
               (unsigned char)*p < 0x80)
            p++;
        if (p >= end || (unsigned char)*p < 0x20) return -1;
        if ((unsigned char)*p >= 0x80) {
            int n = utf8_sequence((const unsigned char *)p, (const unsigned char *)end);
            if (!n) return -1;
            p += n;
            continue;
        }
        if (*p == '"') break;
        esc = 1; /* a backslash */
        if (p + 1 >= end) return -1;
        char c = p[1];
        if (c == 'u') {
            unsigned u;
            if (p + 6 > end || hex4(p + 2, &u) < 0) return -1;
            p += 6;
            if (u >= 0xDC00 && u <= 0xDFFF) return -1; /* a lone low surrogate */
            if (u >= 0xD800 && u <= 0xDBFF) {
                unsigned lo;
                if (p + 6 > end || p[0] != '\\' || p[1] != 'u' || hex4(p + 2, &lo) < 0 ||
                    lo < 0xDC00 || lo > 0xDFFF)
                    return -1;
                p += 6;
            }
        } else if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' ||
                   c == 'r' || c == 't') {
            p += 2;
        } else {
            return -1;
        }
    }
    t->t = T_STR;
    t->s = st->p + 1;
    t->e = p;
    t->esc = esc;
    st->p = p + 1;
    return 0;
}

/* The unescaped content of a string token into `out` (room: its raw length); bytes written. */
static inline Py_ssize_t unescape(const Tok *t, char *out) {
    const char *p = t->s, *e = t->e;
    char *o = out;
    while (p < e) {
        if (*p != '\\') {
            *o++ = *p++;
            continue;
        }
        char c = p[1];
        p += 2;
        switch (c) {
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            unsigned u = 0;
            hex4(p, &u);
            p += 4;
            if (u >= 0xD800 && u <= 0xDBFF) {
                unsigned lo = 0xDC00;
                hex4(p + 2, &lo);
                p += 6;
                u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
            }
            if (u < 0x80) {
                *o++ = (char)u;
            } else if (u < 0x800) {
                *o++ = (char)(0xC0 | (u >> 6));
                *o++ = (char)(0x80 | (u & 0x3F));
            } else if (u < 0x10000) {
                *o++ = (char)(0xE0 | (u >> 12));
                *o++ = (char)(0x80 | ((u >> 6) & 0x3F));
                *o++ = (char)(0x80 | (u & 0x3F));
            } else {
                *o++ = (char)(0xF0 | (u >> 18));
                *o++ = (char)(0x80 | ((u >> 12) & 0x3F));
                *o++ = (char)(0x80 | ((u >> 6) & 0x3F));
                *o++ = (char)(0x80 | (u & 0x3F));
            }
            break;
        }
        default: *o++ = c; /* " \ / */
        }
    }
    return o - out;
}

/* A string token's text, unescaped, as the next value of `c`. (\uXXXX takes 6 bytes for at
   most 3, a surrogate pair 12 for 4: the raw length is always room enough.) */
static inline void str_put_tok(St *st, Col *c, const Tok *t) {
    if (!t->esc) {
        str_put(st, c, t->s, t->e - t->s);
        return;
    }
    char *out = str_begin(st, c, t->e - t->s);
    if (!out) return;
    str_end(st, c, unescape(t, out));
}

/* The double of the number text [s, e): correctly rounded, as Python's and msgspec's parsers
   are, so the same double; -1 when it is out of range (msgspec, the robust path's parser,
   refuses such a number, and so the whole line, wherever it stands) or longer than any double
   needs. */
static int number_value(const char *s, const char *e, double *out) {
    Py_ssize_t len = e - s;
    if (len >= 64) return -1;
    char text[64];
    memcpy(text, s, (size_t)len);
    text[len] = 0;
    char *stop;
    double v = strtod_l(text, &stop, c_locale);
    if (stop != text + len || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

static inline int scan_number(St *st, Tok *t) {
    const char *p = st->p, *end = st->end;
    int isint = 1;
    if (p < end && *p == '-') p++;
    if (p >= end) return -1;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9') p++;
    } else {
        return -1;
    }
    if (p < end && *p == '.') {
        isint = 0;
        p++;
        if (p >= end || *p < '0' || *p > '9') return -1;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        isint = 0;
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || *p < '0' || *p > '9') return -1;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    double v;
    if (!isint && number_value(st->p, p, &v) < 0) return -1; /* out of range, even unread */
    t->t = T_NUM;
    t->s = st->p;
    t->e = p;
    t->isint = isint;
    t->esc = 0;
    st->p = p;
    return 0;
}

static int scan(St *st, Tok *t, int depth);

static int scan_literal(St *st, const char *word, int len, int type, Tok *t) {
    if (st->end - st->p < len || memcmp(st->p, word, (size_t)len) != 0) return -1;
    t->t = type;
    t->s = st->p;
    t->e = st->p + len;
    st->p += len;
    return 0;
}

/* Any JSON value at st->p (after whitespace), checked and skipped; `t` describes it. */
static int scan(St *st, Tok *t, int depth) {
    ws(st);
    if (st->p >= st->end) return -1;
    const char *start = st->p;
    switch (*st->p) {
    case '"': return scan_string(st, t);
    case 't': return scan_literal(st, "true", 4, T_TRUE, t);
    case 'f': return scan_literal(st, "false", 5, T_FALSE, t);
    case 'n': return scan_literal(st, "null", 4, T_NULL, t);
    case '{':
    case '[': {
        if (depth >= MAX_DEPTH) return -1;
        char close = *st->p == '{' ? '}' : ']';
        int obj = close == '}';
        Tok inner;
        st->p++;
        ws(st);
        if (st->p < st->end && *st->p == close) {
            st->p++;
        } else {
            for (;;) {
                if (obj) {
                    ws(st);
                    if (st->p >= st->end || *st->p != '"') return -1;
                    TRY(scan_string(st, &inner));
                    ws(st);
                    if (st->p >= st->end || *st->p != ':') return -1;
                    st->p++;
                }
                TRY(scan(st, &inner, depth + 1));
                ws(st);
                if (st->p >= st->end) return -1;
                if (*st->p == ',') {
                    st->p++;
                    continue;
                }
                if (*st->p != close) return -1;
                st->p++;
                break;
            }
        }
        t->t = obj ? T_OBJ : T_ARR;
        t->s = start;
        t->e = st->p;
        t->esc = 0;
        return 0;
    }
    default: return scan_number(st, t);
    }
}

/* Objects and arrays walked field by field. */
static int obj_begin(St *st) {
    ws(st);
    if (st->p >= st->end || *st->p != '{') return -1;
    st->p++;
    return 0;
}

/* The next key (1), or the end of the object (0); positioned at the value. */
static inline int obj_next(St *st, int *first, const char **key, Py_ssize_t *len) {
    ws(st);
    if (st->p >= st->end) return -1;
    if (*st->p == '}') {
        st->p++;
        return 0;
    }
    if (!*first) {
        if (*st->p != ',') return -1;
        st->p++;
        ws(st);
    }
    *first = 0;
    if (st->p >= st->end || *st->p != '"') return -1;
    Tok k;
    TRY(scan_string(st, &k));
    if (k.esc) return -1; /* an escaped field name: left to the robust path */
    ws(st);
    if (st->p >= st->end || *st->p != ':') return -1;
    st->p++;
    ws(st);
    *key = k.s;
    *len = k.e - k.s;
    return 1;
}

/* At a value: 1 when it opens with `open` (entered), 0 when null, -1 otherwise. */
static int open_or_null(St *st, char open) {
    ws(st);
    if (st->p < st->end && *st->p == open) {
        st->p++;
        return 1;
    }
    Tok t;
    TRY(scan(st, &t, 0));
    return t.t == T_NULL ? 0 : -1;
}

static int arr_or_null(St *st) { return open_or_null(st, '['); }
static int obj_or_null(St *st) { return open_or_null(st, '{'); }

/* The next element (1, positioned at it) or the end of the array (0). */
static inline int arr_next(St *st, int *first) {
    ws(st);
    if (st->p >= st->end) return -1;
    if (*st->p == ']') {
        st->p++;
        return 0;
    }
    if (*first) {
        *first = 0;
        return 1;
    }
    if (*st->p != ',') return -1;
    st->p++;
    ws(st);
    return 1;
}

#define IS(lit) (len == (Py_ssize_t)(sizeof(lit) - 1) && memcmp(key, lit, sizeof(lit) - 1) == 0)

/* Field names the robust path reads and this one does not (proto names, legacy scopes). */
static int left_to_robust(const char *key, Py_ssize_t len) {
    static const char *names[] = {
        "resource_spans", "scope_spans", "instrumentationLibrarySpans",
        "instrumentation_library_spans", "instrumentationLibrary", "instrumentation_library",
        "trace_id", "span_id", "parent_span_id", "start_time_unix_nano", "end_time_unix_nano",
        "time_unix_nano", "string_value", "bool_value", "int_value", "double_value",
        "bytes_value", "array_value", "kvlist_value", NULL};
    if (!memchr(key, '_', (size_t)len) && !memchr(key, 'L', (size_t)len)) return 0;
    for (int k = 0; names[k]; k++)
        if ((Py_ssize_t)strlen(names[k]) == len && memcmp(names[k], key, (size_t)len) == 0)
            return 1;
    return 0;
}

/* An unknown field: skipped, unless the robust path would read it. */
static int skip_field(St *st, const char *key, Py_ssize_t len) {
    if (left_to_robust(key, len)) return -1;
    Tok t;
    return scan(st, &t, 1);
}

/* A field seen twice: msgspec and dicts keep the last one; left to the robust path. */
#define ONCE(bit)                                                                              \
    do {                                                                                       \
        if (seen & (bit)) return -1;                                                           \
        seen |= (bit);                                                                         \
    } while (0)

/* --- scalars ------------------------------------------------------------------------------ */

/* A decimal int64 (optional minus, no leading zeros) spanning exactly [s, e). */
static inline int parse_i64(const char *s, const char *e, int64_t *out) {
    int neg = 0;
    if (s < e && *s == '-') {
        neg = 1;
        s++;
    }
    if (s >= e || e - s > 19) return -1;
    if (*s == '0' && e - s > 1) return -1;
    uint64_t v = 0;
    for (const char *p = s; p < e; p++) {
        if (*p < '0' || *p > '9') return -1;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX) return -1;
    /* 19 digits never wrap a uint64 (max 9,999,...,999 < 1.8e19) */
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

/* An OTLP int64: a JSON integer or a string of one. */
static inline int tok_i64(const Tok *t, int64_t *out) {
    if (t->t == T_NUM && t->isint) return parse_i64(t->s, t->e, out);
    if (t->t == T_STR && !t->esc) return parse_i64(t->s, t->e, out);
    return -1;
}

static int tok_f64(const Tok *t, double *out) {
    if (t->t != T_NUM || (t->isint && t->e - t->s > 18)) return -1;
    double v;
    TRY(number_value(t->s, t->e, &v));
    if (v == 0.0 && t->s[0] == '-') return -1; /* "-0" parses as the int 0 (0.0): robust */
    *out = v;
    return 0;
}

/* An id of `nbytes` bytes as lowercase hex into `out` (2*nbytes chars): 1, or 0 when absent
   or all zero (null), -1 when it is not plain hex (base64, 0x...: the robust path). */
static int tok_id(const Tok *t, int nbytes, char *out) {
    static const char digits[] = "0123456789abcdef";
    if (t->t == T_NONE || t->t == T_NULL) return 0;
    if (t->t != T_STR || t->esc) return -1;
    Py_ssize_t len = t->e - t->s;
    if (len == 0) return 0;
    if (len != 2 * nbytes) return -1;
    int nonzero = 0;
    for (int k = 0; k < len; k++) {
        int v = hexval(t->s[k]);
        if (v < 0) return -1;
        out[k] = digits[v];
        nonzero |= v;
    }
    return nonzero ? 1 : 0;
}

/* An enum (span kind, status code) as OTLP JSON writes it, an integer (unknown: 0); its names
   (SPAN_KIND_CLIENT...) are left to the robust path. */
static int tok_enum(const Tok *t, int count, uint8_t *out) {
    int64_t v;
    *out = 0;
    if (t->t == T_NONE || t->t == T_NULL) return 0;
    if (t->t != T_NUM || !t->isint || parse_i64(t->s, t->e, &v) < 0) return -1;
    if (v >= 0 && v < count) *out = (uint8_t)v;
    return 0;
}

/* Text that is "" when absent (span and event names); or, `optional`, null when absent or
   empty (status message, scope name/version). */
static int text(St *st, Col *c, const Tok *t, int optional) {
    if (t->t == T_NONE || t->t == T_NULL || (optional && t->t == T_STR && t->s == t->e)) {
        if (optional)
            null_put(st, c);
        else
            str_put(st, c, "", 0);
        return 0;
    }
    if (t->t != T_STR) return -1;
    str_put_tok(st, c, t);
    return 0;
}

/* --- attributes --------------------------------------------------------------------------- */

enum { V_STRING, V_BOOL, V_INT, V_DOUBLE, V_BYTES, V_ARRAY, V_KVLIST, V_COUNT };

/* `{"values":[{"stringValue":"a"},...]}` with plain strings, as the JSON text `["a",...]`. */
static int plain_string_array(St *st, const Tok *t, Col *c) {
    const char *save_p = st->p, *save_end = st->end;
    st->p = t->s;
    st->end = t->e;
    int ok = -1;
    Py_ssize_t mark = c->data.len;
    int first = 1, n_keys = 0;
    const char *key;
    Py_ssize_t len;
    char *out;
    if (obj_begin(st) < 0) goto done;
    int r;
    while ((r = obj_next(st, &first, &key, &len)) == 1) {
        if (!IS("values") || n_keys++ || arr_or_null(st) != 1) goto done;
        if (!(out = str_begin(st, c, 1))) goto done;
        *out = '[';
        c->data.len++;
        int efirst = 1, n = 0, e;
        while ((e = arr_next(st, &efirst)) == 1) {
            int f2 = 1, n_fields = 0;
            const char *k2;
            Py_ssize_t len2;
            Tok s = {0};
            if (obj_begin(st) < 0) goto done;
            int r2;
            while ((r2 = obj_next(st, &f2, &k2, &len2)) == 1) {
                if (len2 != 11 || memcmp(k2, "stringValue", 11) != 0 || n_fields++) goto done;
                ws(st);
                if (st->p >= st->end || *st->p != '"' || scan_string(st, &s) < 0 || s.esc)
                    goto done;
            }
            if (r2 < 0 || n_fields != 1) goto done;
            Py_ssize_t slen = s.e - s.s;
            if (!(out = str_begin(st, c, slen + 3))) goto done;
            if (n++) *out++ = ',';
            *out++ = '"';
            memcpy(out, s.s, (size_t)slen);
            out[slen] = '"';
            c->data.len += slen + 2 + (n > 1);
        }
        if (e < 0) goto done;
        if (!(out = str_begin(st, c, 1))) goto done;
        *out = ']';
        c->data.len++;
    }
    if (r < 0 || n_keys != 1) goto done;
    ws(st);
    if (st->p != st->end) goto done;
    ok = 0;
done:
    st->p = save_p;
    st->end = save_end;
    if (ok < 0) {
        c->data.len = mark;
        return -1;
    }
    str_end(st, c, 0);
    return 0;
}

static void pending(St *st, Pool *pool, int kind, const char *s, const char *e) {
    i64_put(st, &pool->pend_index, (int64_t)pool->j.n);
    u8_put(st, &pool->pend_kind, (uint8_t)kind);
    str_put(st, &pool->j, s, e - s);
}

/* One `{"key": K, "value": {AnyValue}}` into `pool`; an empty value adds nothing. */
static int attr_item(St *st, Pool *pool) {
    Tok name = {0}, v[V_COUNT];
    memset(v, 0, sizeof v);
    unsigned seen = 0;
    int first = 1, r;
    const char *key;
    Py_ssize_t len;
    TRY(obj_begin(st));
    while ((r = obj_next(st, &first, &key, &len)) == 1) {
        if (IS("key")) {
            ONCE(1);
            TRY(scan(st, &name, 1));
            if (name.t != T_STR && name.t != T_NULL) return -1;
        } else if (IS("value")) {
            ONCE(2);
            int o = obj_or_null(st);
            TRY(o);
            if (o == 0) continue;
            int vfirst = 1, vr;
            unsigned vseen = 0;
            while ((vr = obj_next(st, &vfirst, &key, &len)) == 1) {
                int f = IS("stringValue") ? V_STRING
                        : IS("intValue")  ? V_INT
                        : IS("doubleValue") ? V_DOUBLE
                        : IS("boolValue")   ? V_BOOL
                        : IS("arrayValue")  ? V_ARRAY
                        : IS("bytesValue")  ? V_BYTES
                        : IS("kvlistValue") ? V_KVLIST
                                            : -1;
                if (f < 0) {
                    TRY(skip_field(st, key, len));
                    continue;
                }
                if (vseen & (1u << f)) return -1;
                vseen |= 1u << f;
                TRY(scan(st, &v[f], 1));
            }
            TRY(vr);
        } else {
            TRY(skip_field(st, key, len));
        }
    }
    TRY(r);
    int f = -1;
    for (int q = 0; q < V_COUNT && f < 0; q++)
        if (v[q].t != T_NONE && v[q].t != T_NULL) f = q;
    if (f < 0) return 0; /* an empty value: the attribute is dropped */
    const Tok *t = &v[f];
    /* check before writing anything */
    int64_t iv = 0;
    double dv = 0;
    if (f == V_STRING && t->t != T_STR) return -1;
    if (f == V_BOOL && t->t != T_TRUE && t->t != T_FALSE) return -1;
    if (f == V_INT) TRY(tok_i64(t, &iv));
    if (f == V_DOUBLE) TRY(tok_f64(t, &dv));
    text(st, &pool->key, &name, 0);
    /* the value in its slot (json for the values after V_DOUBLE), null in the others */
    Col *slots[] = {&pool->s, &pool->b, &pool->i, &pool->f, &pool->j};
    for (int q = 0; q < 5; q++)
        if (q != (f <= V_DOUBLE ? f : 4)) null_put(st, slots[q]);
    if (f == V_STRING) {
        str_put_tok(st, &pool->s, t);
    } else if (f == V_BOOL) {
        bool_put(st, &pool->b, t->t == T_TRUE);
    } else if (f == V_INT) {
        i64_put(st, &pool->i, iv);
    } else if (f == V_DOUBLE) {
        f64_put(st, &pool->f, dv);
    } else if (f == V_BYTES && t->t == T_STR && !t->esc) {
        char *out = str_begin(st, &pool->j, t->e - t->s + 2);
        if (!out) return 0;
        out[0] = '"';
        memcpy(out + 1, t->s, (size_t)(t->e - t->s));
        out[t->e - t->s + 1] = '"';
        str_end(st, &pool->j, t->e - t->s + 2);
    } else if (f == V_ARRAY && t->t == T_OBJ && plain_string_array(st, t, &pool->j) == 0) {
        /* written */
    } else {
        const char *s = t->s, *e = t->e;
        if (t->t == T_STR) { /* the raw JSON text, quotes included */
            s--;
            e++;
        }
        pending(st, pool, f, s, e);
    }
    return 0;
}

/* An attribute list (or null) into `pool`. */
static int attr_list(St *st, Pool *pool) {
    int a = arr_or_null(st);
    TRY(a);
    if (a == 0) return 0;
    int first = 1, r;
    while ((r = arr_next(st, &first)) == 1) TRY(attr_item(st, pool));
    return r;
}

/* Whether text() would take `t`. */
static int opt_text_ok(const Tok *t) {
    return t->t == T_NONE || t->t == T_NULL || t->t == T_STR;
}

static inline int bit_get(const Buf *b, Py_ssize_t i) {
    return (((const unsigned char *)b->p)[i / 8] >> (i % 8)) & 1;
}

/* Item `i` of `src` appended to `dst` (same type). */
static void item_copy(St *st, Col *dst, const Col *src, Py_ssize_t i) {
    if (!bit_get(&src->valid, i)) {
        null_put(st, dst);
        return;
    }
    switch (src->type) {
    case C_STR: {
        int32_t a, b;
        memcpy(&a, src->off.p + 4 * i, 4);
        memcpy(&b, src->off.p + 4 * (i + 1), 4);
        str_put(st, dst, src->data.p + a, b - a);
        break;
    }
    case C_I64:
    case C_F64: fixed_put(st, dst, src->data.p + 8 * i, 8); break;
    case C_BOOL: bool_put(st, dst, bit_get(&src->data, i)); break;
    }
}

static void col_clear(Col *c) {
    c->n = c->nulls = 0;
    c->data.len = 0;
    if (c->type == C_STR || c->type == C_LIST) c->off.len = 4;
}

static void pool_clear(Pool *p) {
    Col *cols[] = {&p->key, &p->s, &p->i, &p->f, &p->b, &p->j, &p->pend_index, &p->pend_kind};
    for (size_t k = 0; k < sizeof cols / sizeof *cols; k++) col_clear(cols[k]);
}

/* Every item of `src` appended to `dst`, pending marks included. */
static void pool_copy(St *st, Pool *dst, const Pool *src) {
    const int64_t *pending = (const int64_t *)src->pend_index.data.p;
    Py_ssize_t q = 0;
    for (Py_ssize_t i = 0; i < src->key.n; i++) {
        if (q < src->pend_index.n && pending[q] == i) {
            i64_put(st, &dst->pend_index, (int64_t)dst->j.n);
            u8_put(st, &dst->pend_kind, (uint8_t)src->pend_kind.data.p[q]);
            q++;
        }
        item_copy(st, &dst->key, &src->key, i);
        item_copy(st, &dst->s, &src->s, i);
        item_copy(st, &dst->i, &src->i, i);
        item_copy(st, &dst->f, &src->f, i);
        item_copy(st, &dst->b, &src->b, i);
        item_copy(st, &dst->j, &src->j, i);
    }
}

/* The scalar fields `a` and `b` (when not NULL) of an object and, with a `pool`, its
   "attributes"; other fields skipped. With `nullable`, null reads as {} (status, scope; events and links must be
   objects). */
static int fields(St *st, int nullable, const char *a, Tok *ta, const char *b, Tok *tb,
                  Pool *pool) {
    int o = nullable ? obj_or_null(st) : (obj_begin(st) < 0 ? -1 : 1);
    TRY(o);
    if (o == 0) return 0;
    int first = 1, r;
    unsigned seen = 0;
    const char *key;
    Py_ssize_t len;
    while ((r = obj_next(st, &first, &key, &len)) == 1) {
        if (a && (Py_ssize_t)strlen(a) == len && memcmp(key, a, (size_t)len) == 0) {
            ONCE(1);
            TRY(scan(st, ta, 1));
        } else if (b && (Py_ssize_t)strlen(b) == len && memcmp(key, b, (size_t)len) == 0) {
            ONCE(2);
            TRY(scan(st, tb, 1));
        } else if (pool && IS("attributes")) {
            ONCE(4);
            TRY(attr_list(st, pool));
        } else {
            TRY(skip_field(st, key, len));
        }
    }
    return r;
}

/* --- spans -------------------------------------------------------------------------------- */

static int event_obj(St *st) {
    Tok time = {0}, name = {0};
    TRY(fields(st, 0, "timeUnixNano", &time, "name", &name, &st->E));
    int64_t ns;
    if (time.t == T_NONE || time.t == T_NULL) {
        null_put(st, &st->ev_time);
    } else {
        TRY(tok_i64(&time, &ns));
        i64_put(st, &st->ev_time, ns);
    }
    TRY(text(st, &st->ev_name, &name, 0));
    list_close(st, &st->ev_attrs, st->E.key.n);
    return 0;
}

static int id_put(St *st, Col *c, const Tok *t, int nbytes, int required) {
    char hex[32];
    int r = tok_id(t, nbytes, hex);
    TRY(r);
    if (r == 0) {
        if (required) return -1; /* missing: the robust path quarantines the span */
        null_put(st, c);
    } else {
        str_put(st, c, hex, 2 * nbytes);
    }
    return 0;
}

static int link_obj(St *st) {
    Tok trace = {0}, span = {0};
    TRY(fields(st, 0, "traceId", &trace, "spanId", &span, &st->L));
    TRY(id_put(st, &st->lk_trace, &trace, 16, 0));
    TRY(id_put(st, &st->lk_span, &span, 8, 0));
    list_close(st, &st->lk_attrs, st->L.key.n);
    return 0;
}

/* An array (or null) of objects, each read by `one`. */
static int each(St *st, int (*one)(St *)) {
    int a = arr_or_null(st);
    TRY(a);
    if (a == 0) return 0;
    int first = 1, r;
    while ((r = arr_next(st, &first)) == 1) TRY(one(st));
    return r;
}

/* The scalar fields of a span, in the order of `Tok scalar[]` in span(). */
enum { S_TRACE, S_SPAN, S_PARENT, S_NAME, S_KIND, S_START, S_END, S_COUNT };
static const char *const SPAN_SCALARS[S_COUNT] = {
    "traceId", "spanId", "parentSpanId", "name", "kind", "startTimeUnixNano", "endTimeUnixNano"};

static int span(St *st) {
    Tok scalar[S_COUNT], code = {0}, message = {0};
    memset(scalar, 0, sizeof scalar);
    unsigned seen = 0;
    int first = 1, r;
    const char *key;
    Py_ssize_t len;
    TRY(obj_begin(st));
    while ((r = obj_next(st, &first, &key, &len)) == 1) {
        int f = 0;
        while (f < S_COUNT && !((Py_ssize_t)strlen(SPAN_SCALARS[f]) == len &&
                                memcmp(key, SPAN_SCALARS[f], (size_t)len) == 0))
            f++;
        if (f < S_COUNT) {
            ONCE(1u << f);
            TRY(scan(st, &scalar[f], 1));
        } else if (IS("attributes")) {
            ONCE(1u << S_COUNT);
            TRY(attr_list(st, &st->A));
        } else if (IS("events")) {
            ONCE(2u << S_COUNT);
            TRY(each(st, event_obj));
        } else if (IS("links")) {
            ONCE(4u << S_COUNT);
            TRY(each(st, link_obj));
        } else if (IS("status")) {
            ONCE(8u << S_COUNT);
            TRY(fields(st, 1, "code", &code, "message", &message, NULL));
        } else {
            TRY(skip_field(st, key, len));
        }
    }
    TRY(r);
    const Tok *start = &scalar[S_START], *stop = &scalar[S_END];
    int64_t t0, t1;
    uint8_t k, c;
    if (start->t == T_NONE || start->t == T_NULL || stop->t == T_NONE || stop->t == T_NULL)
        return -1; /* missing times: quarantined by the robust path */
    TRY(tok_i64(start, &t0));
    TRY(tok_i64(stop, &t1));
    TRY(tok_enum(&scalar[S_KIND], 6, &k));
    TRY(tok_enum(&code, 3, &c));
    TRY(id_put(st, &st->trace, &scalar[S_TRACE], 16, 1));
    TRY(id_put(st, &st->span, &scalar[S_SPAN], 8, 1));
    TRY(id_put(st, &st->parent, &scalar[S_PARENT], 8, 0));
    TRY(text(st, &st->name, &scalar[S_NAME], 0));
    TRY(text(st, &st->message, &message, 1));
    u8_put(st, &st->kind, k);
    u8_put(st, &st->code, c);
    i64_put(st, &st->start, t0);
    i64_put(st, &st->stop, t1);
    i64_put(st, &st->line, st->line_no);
    list_close(st, &st->attrs, st->A.key.n);
    list_close(st, &st->events, st->ev_time.n);
    list_close(st, &st->links, st->lk_trace.n);
    st->spans_read++;
    return 0;
}

static int scope_spans(St *st) {
    Tok name = {0}, version = {0};
    Py_ssize_t first_span = st->trace.n;
    unsigned seen = 0;
    int first = 1, r;
    const char *key;
    Py_ssize_t len;
    TRY(obj_begin(st));
    while ((r = obj_next(st, &first, &key, &len)) == 1) {
        if (IS("scope")) {
            ONCE(1);
            TRY(fields(st, 1, "name", &name, "version", &version, NULL));
        } else if (IS("spans")) {
            ONCE(2);
            TRY(each(st, span));
        } else {
            TRY(skip_field(st, key, len));
        }
    }
    TRY(r);
    /* the scope's name and version on each of its spans (checked even when it has none) */
    if (!opt_text_ok(&name) || !opt_text_ok(&version)) return -1;
    for (Py_ssize_t k = first_span; k < st->trace.n; k++) {
        TRY(text(st, &st->scope_name, &name, 1));
        TRY(text(st, &st->scope_version, &version, 1));
    }
    return 0;
}

/* The index of the resource list of the current resource (in `R`), whose JSON text is
 * [s, s + len): a text met before in this call gives the list made then. */
static int32_t resource_index(St *st, const char *s, Py_ssize_t len) {
    uint64_t hash = 1469598103934665603ULL; /* FNV-1a */
    for (Py_ssize_t i = 0; i < len; i++) hash = (hash ^ (unsigned char)s[i]) * 1099511628211ULL;
    for (int k = 0; k < st->nres; k++) {
        const Res *seen = &st->res[k];
        if (seen->hash == hash && seen->len == len && (len == 0 || !memcmp(seen->s, s, len)))
            return seen->index;
    }
    int32_t index = (int32_t)st->res_attrs.n;
    pool_copy(st, &st->RS, &st->R);
    list_close(st, &st->res_attrs, st->RS.key.n);
    if (st->nres < RES_SEEN) st->res[st->nres++] = (Res){s, len, hash, index};
    return index;
}

static int resource_spans(St *st) {
    Py_ssize_t first_span = st->trace.n;
    pool_clear(&st->R);
    unsigned seen = 0;
    int first = 1, r;
    const char *key, *text = NULL;
    Py_ssize_t len, text_len = 0;
    TRY(obj_begin(st));
    while ((r = obj_next(st, &first, &key, &len)) == 1) {
        if (IS("resource")) {
            ONCE(1);
            text = st->p;
            TRY(fields(st, 1, NULL, NULL, NULL, NULL, &st->R));
            text_len = st->p - text;
        } else if (IS("scopeSpans")) {
            ONCE(2);
            TRY(each(st, scope_spans));
        } else {
            TRY(skip_field(st, key, len));
        }
    }
    TRY(r);
    /* the resource's attributes once, each of its spans pointing at them */
    if (st->trace.n == first_span) return 0;
    int32_t index = resource_index(st, text, text_len);
    for (Py_ssize_t k = first_span; k < st->trace.n; k++) i32_put(st, &st->res_index, index);
    return 0;
}

/* One line: `{"resourceSpans": [...]}` and nothing after it. */
static int request(St *st) {
    unsigned seen = 0;
    int first = 1, r;
    const char *key;
    Py_ssize_t len;
    TRY(obj_begin(st));
    while ((r = obj_next(st, &first, &key, &len)) == 1) {
        if (IS("resourceSpans")) {
            ONCE(1);
            TRY(each(st, resource_spans));
        } else {
            TRY(skip_field(st, key, len));
        }
    }
    TRY(r);
    if (!seen) return -1;
    ws(st);
    return st->p == st->end ? 0 : -1;
}

/* --- the Python function ------------------------------------------------------------------ */

static void pool_init(St *st, Pool *p) {
    col_init(st, &p->key, "key", C_STR);
    col_init(st, &p->s, "str", C_STR);
    col_init(st, &p->i, "int", C_I64);
    col_init(st, &p->f, "float", C_F64);
    col_init(st, &p->b, "bool", C_BOOL);
    col_init(st, &p->j, "json", C_STR);
    col_init(st, &p->pend_index, "pending_index", C_I64);
    col_init(st, &p->pend_kind, "pending_kind", C_U8);
}

static void st_init(St *st) {
    memset(st, 0, sizeof *st);
    col_init(st, &st->trace, "trace_id", C_STR);
    col_init(st, &st->span, "span_id", C_STR);
    col_init(st, &st->parent, "parent_span_id", C_STR);
    col_init(st, &st->name, "name", C_STR);
    col_init(st, &st->kind, "kind", C_U8);
    col_init(st, &st->start, "start_ns", C_I64);
    col_init(st, &st->stop, "end_ns", C_I64);
    col_init(st, &st->code, "status_code", C_U8);
    col_init(st, &st->message, "status_message", C_STR);
    col_init(st, &st->line, "source_pos", C_I64);
    col_init(st, &st->attrs, "attributes", C_LIST);
    col_init(st, &st->events, "events", C_LIST);
    col_init(st, &st->links, "links", C_LIST);
    col_init(st, &st->scope_name, "scope_name", C_STR);
    col_init(st, &st->scope_version, "scope_version", C_STR);
    col_init(st, &st->res_attrs, "resource_attributes", C_LIST);
    col_init(st, &st->res_index, "resource_index", C_I32);
    col_init(st, &st->ev_time, "event_time", C_I64);
    col_init(st, &st->ev_name, "event_name", C_STR);
    col_init(st, &st->ev_attrs, "event_attributes", C_LIST);
    col_init(st, &st->lk_trace, "link_trace_id", C_STR);
    col_init(st, &st->lk_span, "link_span_id", C_STR);
    col_init(st, &st->lk_attrs, "link_attributes", C_LIST);
    pool_init(st, &st->A);
    pool_init(st, &st->RS);
    pool_init(st, &st->E);
    pool_init(st, &st->L);
    pool_init(st, &st->R);
}

static void st_free(St *st) {
    for (int k = 0; k < st->ncols; k++) col_free(st->all[k]);
}

/* A read-only buffer owning memory handed over by a column: Arrow wraps it without a copy. */
typedef struct {
    PyObject_HEAD char *p;
    Py_ssize_t len;
} Blob;

static int blob_getbuffer(PyObject *self, Py_buffer *view, int flags) {
    Blob *b = (Blob *)self;
    return PyBuffer_FillInfo(view, self, b->p ? b->p : (char *)"", b->len, 1, flags);
}

static void blob_dealloc(PyObject *self) {
    free(((Blob *)self)->p);
    Py_TYPE(self)->tp_free(self);
}

static PyBufferProcs blob_buffer = {blob_getbuffer, NULL};

static PyTypeObject BlobType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "analyzer.ingest._otlp_lines.Blob",
    .tp_basicsize = sizeof(Blob),
    .tp_dealloc = blob_dealloc,
    .tp_as_buffer = &blob_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Bytes of one Arrow buffer, owned until the last view is released.",
};

/* The first `len` bytes of `b`, which gives its memory away. */
static PyObject *bytes_of(Buf *b, Py_ssize_t len) {
    Blob *blob = PyObject_New(Blob, &BlobType);
    if (!blob) return NULL;
    if (b->cap - len > (1 << 20)) { /* give back what the doubling left unused */
        char *p = realloc(b->p, (size_t)(len ? len : 1));
        if (p) b->p = p;
    }
    blob->p = b->p;
    blob->len = len;
    b->p = NULL;
    b->len = b->cap = 0;
    return (PyObject *)blob;
}

/* (length, null count, validity, offsets, data) of a column; absent buffers are None. */
static PyObject *col_tuple(Col *c) {
    PyObject *valid, *off, *data;
    if (c->nulls) {
        valid = bytes_of(&c->valid, (c->n + 7) / 8);
    } else {
        valid = Py_NewRef(Py_None);
    }
    if (c->type == C_STR || c->type == C_LIST)
        off = bytes_of(&c->off, 4 * (c->n + 1));
    else
        off = Py_NewRef(Py_None);
    if (c->type == C_LIST)
        data = Py_NewRef(Py_None);
    else if (c->type == C_BOOL)
        data = bytes_of(&c->data, (c->n + 7) / 8);
    else
        data = bytes_of(&c->data, c->data.len);
    if (!valid || !off || !data) {
        Py_XDECREF(valid);
        Py_XDECREF(off);
        Py_XDECREF(data);
        return NULL;
    }
    return Py_BuildValue("(nnNNN)", c->n, c->nulls, valid, off, data);
}

/* d[name] = v, the reference to `v` (NULL: an error already set) given away. */
static int dict_put(PyObject *d, const char *name, PyObject *v) {
    int r = v ? PyDict_SetItemString(d, name, v) : -1;
    Py_XDECREF(v);
    return r;
}

static PyObject *pool_dict(Pool *p) {
    PyObject *d = PyDict_New();
    Col *cols[] = {&p->key, &p->s, &p->i, &p->f, &p->b, &p->j, &p->pend_index, &p->pend_kind};
    for (size_t k = 0; d && k < sizeof cols / sizeof *cols; k++) {
        if (dict_put(d, cols[k]->name, col_tuple(cols[k])) < 0) Py_CLEAR(d);
    }
    return d;
}

PyDoc_STRVAR(parse_doc,
             "parse(lines, numbers) -> (columns, refused, spans_read)\n\n"
             "Read OTLP/JSON request lines (bytes-like, valid UTF-8) into Arrow buffers.\n"
             "`numbers` are their line numbers (source_pos). `columns` maps each column to\n"
             "(length, null_count, validity, offsets, data); the attribute pools are dicts\n"
             "under 'span_attrs', 'resource_attrs', 'event_attrs' and 'link_attrs'.\n"
             "'resource_attributes' holds one list per resource (a resource's JSON text met again\n"
             "gives the same list), 'resource_index' each span's.\n"
             "`refused` lists the indices of lines left to the robust path. The lines are\n"
             "read without the GIL. Raises OverflowError when a column outgrows 32-bit offsets.");

static PyObject *parse(PyObject *self, PyObject *args) {
    PyObject *lines, *numbers;
    (void)self;
    if (!PyArg_ParseTuple(args, "OO", &lines, &numbers)) return NULL;
    PyObject *seq = PySequence_Fast(lines, "lines must be a sequence");
    if (!seq) return NULL;
    PyObject *nums = PySequence_Fast(numbers, "numbers must be a sequence");
    if (!nums) {
        Py_DECREF(seq);
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (PySequence_Fast_GET_SIZE(nums) != n) {
        PyErr_SetString(PyExc_ValueError, "lines and numbers differ in length");
        Py_DECREF(seq);
        Py_DECREF(nums);
        return NULL;
    }
    St *st = malloc(sizeof *st);
    Py_buffer *views = calloc((size_t)(n ? n : 1), sizeof *views);
    int64_t *line_nos = malloc((size_t)(n ? n : 1) * sizeof *line_nos);
    char *refused_at = calloc((size_t)(n ? n : 1), 1);
    PyObject *refused = PyList_New(0), *result = NULL;
    Py_ssize_t held = 0; /* views taken */
    if (!st || !views || !line_nos || !refused_at || !refused) {
        free(st);
        free(views);
        free(line_nos);
        free(refused_at);
        Py_XDECREF(refused);
        Py_DECREF(seq);
        Py_DECREF(nums);
        return PyErr_NoMemory();
    }
    st_init(st);
    for (; held < n; held++) {
        line_nos[held] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(nums, held));
        if (line_nos[held] == -1 && PyErr_Occurred()) goto fail;
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, held), &views[held], PyBUF_SIMPLE) < 0)
            goto fail;
    }
    /* the lines are read without the GIL: other threads parse other lines meanwhile */
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < n && !st->oom && !st->overflow; k++) {
        st->line_no = line_nos[k];
        st->p = views[k].buf;
        st->end = st->p + views[k].len;
        Py_ssize_t spans_before = st->spans_read;
        mark_all(st);
        if (request(st) < 0) {
            rollback_all(st);
            st->spans_read = spans_before;
            refused_at[k] = 1;
        }
    }
    Py_END_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < n; k++) {
        if (!refused_at[k]) continue;
        PyObject *index = PyLong_FromSsize_t(k);
        if (!index || PyList_Append(refused, index) < 0) {
            Py_XDECREF(index);
            goto fail;
        }
        Py_DECREF(index);
    }
    if (st->oom) {
        PyErr_NoMemory();
        goto fail;
    }
    if (st->overflow) {
        PyErr_SetString(PyExc_OverflowError, "a column outgrew 32-bit offsets");
        goto fail;
    }
    PyObject *cols = PyDict_New();
    if (!cols) goto fail;
    for (int k = 0; k < st->ncols && st->all[k] != &st->A.key; k++) { /* then the pools */
        if (dict_put(cols, st->all[k]->name, col_tuple(st->all[k])) < 0) {
            Py_DECREF(cols);
            goto fail;
        }
    }
    const char *pool_names[] = {"span_attrs", "resource_attrs", "event_attrs", "link_attrs"};
    Pool *pools[] = {&st->A, &st->RS, &st->E, &st->L};
    for (int k = 0; k < 4; k++) {
        if (dict_put(cols, pool_names[k], pool_dict(pools[k])) < 0) {
            Py_DECREF(cols);
            goto fail;
        }
    }
    result = Py_BuildValue("(NNn)", cols, refused, st->spans_read);
    refused = NULL;
fail:
    for (Py_ssize_t k = 0; k < held; k++) PyBuffer_Release(&views[k]);
    free(views);
    free(line_nos);
    free(refused_at);
    Py_XDECREF(refused);
    st_free(st);
    free(st);
    Py_DECREF(seq);
    Py_DECREF(nums);
    return result;
}

static PyMethodDef methods[] = {{"parse", parse, METH_VARARGS, parse_doc}, {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_otlp_lines",
    "The native fast path of the OTLP JSON lines reader (see analyzer.ingest.otlp_json).", -1,
    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__otlp_lines(void) {
    if (PyType_Ready(&BlobType) < 0) return NULL;
    c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    if (!c_locale) return PyErr_NoMemory();
    return PyModule_Create(&module);
}
