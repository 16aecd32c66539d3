/* The native fast path of analyzer.checks.grounded_arguments.argument_leaves.

   leaves(validity, offsets, data, offset, n) reads n texts of an Arrow large_string array (its
   buffers; validity may be None) and returns the scalar leaves of those that are flat JSON
   objects: scalars and arrays of scalars, no escape or control character in any string, no
   key twice, strict JSON numbers and literals. Every other text (null, nested, escaped,
   duplicate keys, not JSON) is marked for the Python reader (grounded_arguments._walk), which
   decides.

   Returns (rest, row, leaf_no, path_offsets, path_data, name_offsets, name_data, value_offsets,
   value_data, is_number) as bytes: rest holds one byte per text (1: left to Python); then one
   entry per leaf in document order, booleans and nulls left out: its text's row (int64), its
   rank among its text's leaves (int64), its path (the key, with "[i]" for the item i of an
   array), its key and its value (a string's content or a number's digits; each text as Arrow
   large_string offsets and data), and whether it is a number (uint8). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_KEYS 64 /* objects with more keys are left to Python (keys compared pairwise) */

/* A growable bytes object, written in place and returned as is (no copy). */
typedef struct {
    PyObject *bytes;
    char *p; /* its data */
    Py_ssize_t len, cap;
} Buf;

/* The returned buffers, after `rest`. */
enum {
    ROW,
    LEAF_NO,
    PATH_OFF,
    PATH_DATA,
    NAME_OFF,
    NAME_DATA,
    VALUE_OFF,
    VALUE_DATA,
    IS_NUMBER,
    NBUF
};

typedef struct {
    Buf b[NBUF];
} Out;

typedef struct {
    const char *s, *end;
} Cursor;

/* The bytes that end a run of plain string content: the quote, the backslash, controls. */
static uint8_t STOP[256];

static inline void skip_ws(Cursor *c) {
    while (c->s < c->end && (*c->s == ' ' || *c->s == '\t' || *c->s == '\n' || *c->s == '\r'))
        c->s++;
}

static inline int at(Cursor *c, char ch) { return c->s < c->end && *c->s == ch; }

/* Consume `ch` if it comes next. */
static inline int eat(Cursor *c, char ch) {
    if (!at(c, ch)) return 0;
    c->s++;
    return 1;
}

/* After an item of an array or an object: 1 at its end `close` (consumed), 0 after a comma
   (and the spaces after it), -1 at anything else. */
static int after_item(Cursor *c, char close) {
    skip_ws(c);
    if (eat(c, close)) return 1;
    if (!eat(c, ',')) return -1;
    skip_ws(c);
    return 0;
}

/* A string without escapes or control characters: its content in [*start, *start + *len). */
static int read_string(Cursor *c, const char **start, Py_ssize_t *len) {
    if (!at(c, '"')) return -1;
    const char *p = ++c->s;
    while (p < c->end && !STOP[(unsigned char)*p]) p++;
    if (p >= c->end || *p != '"') return -1; /* an escape or a control character: not flat */
    *start = c->s;
    *len = p - c->s;
    c->s = p + 1;
    return 0;
}

static inline int at_digit(Cursor *c) { return c->s < c->end && *c->s >= '0' && *c->s <= '9'; }

/* A JSON number (-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?). */
static int read_number(Cursor *c) {
    eat(c, '-');
    if (!eat(c, '0')) {
        if (!at_digit(c)) return -1;
        while (at_digit(c)) c->s++;
    }
    if (eat(c, '.')) {
        if (!at_digit(c)) return -1;
        while (at_digit(c)) c->s++;
    }
    if (eat(c, 'e') || eat(c, 'E')) {
        if (!eat(c, '+')) eat(c, '-');
        if (!at_digit(c)) return -1;
        while (at_digit(c)) c->s++;
    }
    return 0;
}

static int literal(Cursor *c, const char *word, Py_ssize_t n) {
    if (c->end - c->s < n || memcmp(c->s, word, (size_t)n) != 0) return -1;
    c->s += n;
    return 0;
}

/* `b` on a new bytes object of `cap` bytes (its length set at the end). */
static int buf_init(Buf *b, Py_ssize_t cap) {
    if (!(b->bytes = PyBytes_FromStringAndSize(NULL, cap))) return -1;
    b->p = PyBytes_AS_STRING(b->bytes);
    b->cap = cap;
    return 0;
}

/* Room for `extra` more bytes in `b`. */
static inline int buf_room(Buf *b, Py_ssize_t extra) {
    if (b->len + extra <= b->cap) return 0;
    Py_ssize_t cap = b->cap;
    while (cap < b->len + extra) cap *= 2;
    if (_PyBytes_Resize(&b->bytes, cap)) return -1;
    b->p = PyBytes_AS_STRING(b->bytes);
    b->cap = cap;
    return 0;
}

static inline void put(Buf *b, const void *src, Py_ssize_t n) {
    memcpy(b->p + b->len, src, (size_t)n);
    b->len += n;
}

static inline void put_end(Buf *offsets, const Buf *data) {
    int64_t end = data->len;
    put(offsets, &end, 8);
}

/* A leaf into `o`. */
static int emit(Out *o, int64_t row, int64_t *rank, int32_t item, const char *key,
                Py_ssize_t key_len, const char *value, Py_ssize_t value_len, uint8_t number) {
    char index[16]; /* "[item]" */
    int index_len = 0;
    if (item >= 0) {
        char digits[12];
        int n = 0;
        do digits[n++] = (char)('0' + item % 10); while ((item /= 10));
        index[index_len++] = '[';
        while (n) index[index_len++] = digits[--n];
        index[index_len++] = ']';
    }
    if (buf_room(&o->b[ROW], 8) || buf_room(&o->b[LEAF_NO], 8) || buf_room(&o->b[PATH_OFF], 8) ||
        buf_room(&o->b[PATH_DATA], key_len + index_len) || buf_room(&o->b[NAME_OFF], 8) ||
        buf_room(&o->b[NAME_DATA], key_len) || buf_room(&o->b[VALUE_OFF], 8) ||
        buf_room(&o->b[VALUE_DATA], value_len) || buf_room(&o->b[IS_NUMBER], 1))
        return -2;
    put(&o->b[ROW], &row, 8);
    put(&o->b[LEAF_NO], rank, 8);
    put(&o->b[PATH_DATA], key, key_len);
    put(&o->b[PATH_DATA], index, index_len);
    put_end(&o->b[PATH_OFF], &o->b[PATH_DATA]);
    put(&o->b[NAME_DATA], key, key_len);
    put_end(&o->b[NAME_OFF], &o->b[NAME_DATA]);
    put(&o->b[VALUE_DATA], value, value_len);
    put_end(&o->b[VALUE_OFF], &o->b[VALUE_DATA]);
    put(&o->b[IS_NUMBER], &number, 1);
    (*rank)++;
    return 0;
}

/* A scalar value: a leaf when a string or a number. -1: not flat; -2: out of memory. */
static int read_value(Cursor *c, Out *o, int64_t row, int64_t *rank, int32_t item,
                      const char *key, Py_ssize_t key_len) {
    const char *start;
    Py_ssize_t len;
    if (at(c, '"')) {
        if (read_string(c, &start, &len)) return -1;
        return emit(o, row, rank, item, key, key_len, start, len, 0);
    }
    if (at(c, 't')) return literal(c, "true", 4);
    if (at(c, 'f')) return literal(c, "false", 5);
    if (at(c, 'n')) return literal(c, "null", 4);
    start = c->s;
    if (read_number(c)) return -1;
    return emit(o, row, rank, item, key, key_len, start, c->s - start, 1);
}

/* One text: 0 if a flat object (its leaves emitted), -1 if not, -2 out of memory. */
static int read_object(Cursor *c, Out *o, int64_t row) {
    const char *keys[MAX_KEYS];
    Py_ssize_t key_lens[MAX_KEYS];
    int nkeys = 0, r;
    int64_t rank = 0;
    skip_ws(c);
    if (!eat(c, '{')) return -1;
    skip_ws(c);
    if (!eat(c, '}')) {
        do {
            const char *key;
            Py_ssize_t key_len;
            if (read_string(c, &key, &key_len) || nkeys == MAX_KEYS) return -1;
            for (int k = 0; k < nkeys; k++) /* a key twice: Python's reading decides */
                if (key_lens[k] == key_len && memcmp(keys[k], key, (size_t)key_len) == 0)
                    return -1;
            keys[nkeys] = key;
            key_lens[nkeys++] = key_len;
            skip_ws(c);
            if (!eat(c, ':')) return -1;
            skip_ws(c);
            if (!eat(c, '[')) {
                r = read_value(c, o, row, &rank, -1, key, key_len);
            } else {
                skip_ws(c);
                r = eat(c, ']') ? 1 : 0;
                for (int32_t item = 0; r == 0; item++)
                    if ((r = read_value(c, o, row, &rank, item, key, key_len)) == 0)
                        r = after_item(c, ']');
                if (r == 1) r = 0;
            }
            if (r) return r;
        } while ((r = after_item(c, '}')) == 0);
        if (r < 0) return r;
    }
    skip_ws(c);
    return c->s == c->end ? 0 : -1;
}

static int valid_at(const Py_buffer *validity, Py_ssize_t i) {
    if (!validity->buf) return 1;
    return (((const uint8_t *)validity->buf)[i >> 3] >> (i & 7)) & 1;
}

/* The arguments of `leaves`, checked: 0, or -1 with an exception set. */
static int texts_args(PyObject *args, Py_buffer *validity, Py_buffer *offsets, Py_buffer *data,
                      Py_ssize_t *offset, Py_ssize_t *n) {
    PyObject *validity_obj;
    if (!PyArg_ParseTuple(args, "Oy*y*nn", &validity_obj, offsets, data, offset, n)) return -1;
    if (validity_obj != Py_None && PyObject_GetBuffer(validity_obj, validity, PyBUF_SIMPLE))
        return -1;
    if (*offset < 0 || *n < 0 || offsets->len < (*offset + *n + 1) * 8 ||
        (validity->buf && validity->len * 8 < *offset + *n)) {
        PyErr_SetString(PyExc_ValueError, "buffers too short for the texts");
        return -1;
    }
    return 0;
}

static void release_texts(Py_buffer *validity, Py_buffer *offsets, Py_buffer *data) {
    if (validity->obj) PyBuffer_Release(validity);
    if (offsets->obj) PyBuffer_Release(offsets);
    if (data->obj) PyBuffer_Release(data);
}

static PyObject *leaves(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer validity = {0}, offsets = {0}, data = {0};
    Py_ssize_t offset, n;
    PyObject *result = NULL, *rest = NULL;
    Out o;
    memset(&o, 0, sizeof o);
    if (texts_args(args, &validity, &offsets, &data, &offset, &n)) goto done;
    rest = PyBytes_FromStringAndSize(NULL, n);
    if (!rest) goto done;
    char *left = PyBytes_AS_STRING(rest);
    const int64_t *off = (const int64_t *)offsets.buf + offset;
    int64_t zero = 0;
    /* Sized for the usual texts at once (a leaf for every 64 bytes of text; strings as long as
       the texts); never a NULL pointer, so that an empty buffer is b"", not None. */
    Py_ssize_t leaves_guess = 64 + data.len / 64;
    for (int b = 0; b < NBUF; b++) {
        Py_ssize_t size = b == PATH_DATA || b == NAME_DATA || b == VALUE_DATA ? 64 + data.len
                          : b == IS_NUMBER                                   ? leaves_guess
                                                                             : 8 * leaves_guess;
        if (buf_init(&o.b[b], size)) goto done;
    }
    put(&o.b[PATH_OFF], &zero, 8);
    put(&o.b[NAME_OFF], &zero, 8);
    put(&o.b[VALUE_OFF], &zero, 8);
    for (Py_ssize_t i = 0; i < n; i++) {
        left[i] = 1;
        if (!valid_at(&validity, offset + i)) continue;
        if (off[i] < 0 || off[i] > off[i + 1] || off[i + 1] > (int64_t)data.len) {
            PyErr_SetString(PyExc_ValueError, "offsets out of the data");
            goto done;
        }
        Py_ssize_t marks[NBUF];
        for (int b = 0; b < NBUF; b++) marks[b] = o.b[b].len;
        Cursor c = {(const char *)data.buf + off[i], (const char *)data.buf + off[i + 1]};
        int r = read_object(&c, &o, i);
        if (r == -2) goto nomem;
        if (r == 0)
            left[i] = 0;
        else /* not flat: its leaves so far are dropped */
            for (int b = 0; b < NBUF; b++) o.b[b].len = marks[b];
    }
    for (int b = 0; b < NBUF; b++)
        if (_PyBytes_Resize(&o.b[b].bytes, o.b[b].len)) goto done;
    result = PyTuple_Pack(1 + NBUF, rest, o.b[ROW].bytes, o.b[LEAF_NO].bytes, o.b[PATH_OFF].bytes,
                          o.b[PATH_DATA].bytes, o.b[NAME_OFF].bytes, o.b[NAME_DATA].bytes,
                          o.b[VALUE_OFF].bytes, o.b[VALUE_DATA].bytes, o.b[IS_NUMBER].bytes);
    goto done;
nomem:
    PyErr_NoMemory();
done:
    Py_XDECREF(rest);
    for (int b = 0; b < NBUF; b++) Py_XDECREF(o.b[b].bytes);
    release_texts(&validity, &offsets, &data);
    return result;
}

PyDoc_STRVAR(leaves_doc,
             "leaves(validity, offsets, data, offset, n) -> (rest, row, leaf_no, path_offsets, "
             "path_data, name_offsets, name_data, value_offsets, value_data, is_number)\n\n"
             "The leaves of the flat JSON objects among n texts of an Arrow large_string "
             "array (see the module's source).");

static PyMethodDef methods[] = {{"leaves", leaves, METH_VARARGS, leaves_doc},
                                {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_flat_leaves",
    "The native fast path of analyzer.checks.grounded_arguments.argument_leaves.", -1, methods,
    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__flat_leaves(void) {
    for (int ch = 0; ch < 0x20; ch++) STOP[ch] = 1;
    STOP['"'] = STOP['\\'] = 1;
    return PyModule_Create(&module);
}
