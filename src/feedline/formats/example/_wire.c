/*
 * feedline.formats.example._wire: the tf.train.Example wire format in C, for speed.
 *
 * It is an accelerator for the pure-Python codec of this package (wire.py, codec.py,
 * parse.py), which stays the reference: for every input this module either returns
 * exactly what the Python path returns, or returns None ("fallback") so that the caller
 * runs the Python path, which then produces the result or the precise error. The decoder
 * follows the Python decoder's rules (not protobuf's where they differ):
 *
 *   Example   a byte 0x0A starts a Features message; any other field is skipped
 *   Features  a byte 0x0A starts a map entry; any other field is skipped
 *   entry     varint tags: 10 is the key (default b""), 18 the Feature (absent: empty)
 *   Feature   varint tags: fields 1/2/3 with wire type 2 are bytes/float/int64 lists; a
 *             list of another kind than the current one replaces it, one of the same
 *             kind adds to it; other fields are skipped
 *   list      field 1: wire type 2 is a bytes value or a packed run, wire type 5 one
 *             float (float lists), wire type 0 one varint (int64 lists); others skipped
 *   last map entry for a key wins (an earlier one is dropped whole)
 *
 * Fallback (None) on any damage, and on what the Python path treats specially and this
 * module does not: groups, a map entry with a field other than its key and value or with
 * the key or the value twice (protobuf merges those), feature names that are not UTF-8
 * (decode only), and records that are not exactly bytes.
 *
 * configure(frombuffer, int64, float32, BytesList, ndarray, feature_bytes) -> None
 *   Hands over numpy.frombuffer, the two dtypes, the BytesList class, numpy.ndarray and
 *   the Python encoder of one feature, feature_bytes(name, value, packed) -> bytes. Must
 *   be called once before the functions below.
 * decode_example(record: bytes) -> dict | None
 *   {name: int64 array | float32 array | list of bytes (BytesList when empty) | None}.
 * scan_examples(records: list, keys: list of bytes) -> list | None
 *   For each key, (kinds, counts, int64s, float32s, strings): kinds a bytearray of one
 *   code per record (0 absent or no list set, 1 bytes, 2 float, 3 int64), counts a
 *   bytearray of native int64 (values of the record's kind), int64s and float32s
 *   bytearrays of native values in record order, strings a list of bytes. Scans with the
 *   GIL released.
 * encode_example(features: dict, packed) -> bytes | None
 *   Byte-identical to the Python encoder. Values of the usual types (None, int, float,
 *   bytes, str, lists of those, BytesList, C-contiguous numpy arrays of bool, integer and
 *   float32/float64 dtypes) are written here; any other value, or one the Python path
 *   would reject or warn about (an int outside int64, a float overflowing float32), goes
 *   through feature_bytes, so errors are the Python path's. None when features holds a
 *   name that is not a str or not encodable.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "feedline.formats.example._wire assumes a little-endian machine"
#endif

enum { OK = 0, FALLBACK = 1, NOMEM = 2 };
enum { K_NONE = 0, K_BYTES = 1, K_FLOAT = 2, K_INT64 = 3 };

static PyObject *g_frombuffer, *g_int64, *g_float32, *g_byteslist, *g_ndarray, *g_feature_bytes;

/* ------------------------------------------------------------------ growable buffers */

typedef struct {
    char *data;
    size_t len, cap;
} Buf;

static int buf_reserve(Buf *b, size_t extra)
{
    if (b->len + extra <= b->cap)
        return OK;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra)
        cap *= 2;
    char *data = PyMem_RawRealloc(b->data, cap);
    if (data == NULL)
        return NOMEM;
    b->data = data;
    b->cap = cap;
    return OK;
}

static int buf_put(Buf *b, const void *src, size_t n)
{
    if (n == 0) /* nothing to copy; b->data may still be NULL, which memcpy must not get */
        return OK;
    if (buf_reserve(b, n))
        return NOMEM;
    memcpy(b->data + b->len, src, n);
    b->len += n;
    return OK;
}

static void buf_free(Buf *b)
{
    PyMem_RawFree(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* ------------------------------------------------------------------ reading */

typedef const unsigned char *Ptr;

/* A varint of at most 10 bytes, modulo 2**64. */
static inline int rd_varint(Ptr *pp, Ptr end, uint64_t *out)
{
    Ptr p = *pp;
    uint64_t v = 0;
    for (int i = 0; i < 10; i++) {
        if (p >= end)
            return FALLBACK;
        unsigned b = *p++;
        v |= (uint64_t)(b & 0x7F) << (7 * i);
        if (b < 0x80) {
            *out = v;
            *pp = p;
            return OK;
        }
    }
    return FALLBACK;
}

/* A field tag: a varint below 2**32 with a field number >= 1. */
static inline int rd_tag(Ptr *pp, Ptr end, uint64_t *key)
{
    if (*pp < end && **pp < 0x80) {
        *key = **pp;
        (*pp)++;
    }
    else if (rd_varint(pp, end, key))
        return FALLBACK;
    return (*key >> 32 || *key < 8) ? FALLBACK : OK;
}

/* A length prefix: *pp moves past it, *stop is the end of the bytes it counts. */
static inline int rd_len(Ptr *pp, Ptr end, Ptr *stop)
{
    uint64_t n;
    if (*pp < end && **pp < 0x80) {
        n = **pp;
        (*pp)++;
    }
    else if (rd_varint(pp, end, &n))
        return FALLBACK;
    if (n > (uint64_t)(end - *pp))
        return FALLBACK;
    *stop = *pp + n;
    return OK;
}

/* Skip the value of a field of wire type ``wire`` (groups fall back). */
static inline int skip_value(Ptr *pp, Ptr end, unsigned wire)
{
    uint64_t v;
    Ptr stop;
    switch (wire) {
    case 0:
        return rd_varint(pp, end, &v);
    case 1:
        if (end - *pp < 8)
            return FALLBACK;
        *pp += 8;
        return OK;
    case 2:
        if (rd_len(pp, end, &stop))
            return FALLBACK;
        *pp = stop;
        return OK;
    case 5:
        if (end - *pp < 4)
            return FALLBACK;
        *pp += 4;
        return OK;
    default:
        return FALLBACK;
    }
}

static inline int skip_field(Ptr *pp, Ptr end)
{
    uint64_t key;
    if (rd_tag(pp, end, &key))
        return FALLBACK;
    return skip_value(pp, end, (unsigned)(key & 7));
}

/* ------------------------------------------------------------------ Feature values */

typedef struct {
    const char *ptr;
    Py_ssize_t len;
} Span;

/* Values of Features: int64s, float32s and byte strings (spans of the record). */
typedef struct {
    Buf i64, f32, str;
} Acc;

typedef struct {
    size_t i64, f32, str;
} Mark;

static inline Mark acc_mark(const Acc *a)
{
    Mark m = {a->i64.len, a->f32.len, a->str.len};
    return m;
}

static inline void acc_truncate(Acc *a, Mark m)
{
    a->i64.len = m.i64;
    a->f32.len = m.f32;
    a->str.len = m.str;
}

static void acc_free(Acc *a)
{
    buf_free(&a->i64);
    buf_free(&a->f32);
    buf_free(&a->str);
}

static inline int put_i64(Acc *a, uint64_t v)
{
    return buf_put(&a->i64, &v, 8);
}

/* The varints of a packed run that ends with a terminating byte. */
static int put_varints(Acc *a, Ptr p, Ptr end)
{
    if (buf_reserve(&a->i64, (size_t)(end - p) * 8))
        return NOMEM;
    int64_t *out = (int64_t *)(a->i64.data + a->i64.len);
    size_t n = 0;
    while (p < end) {
        if (*p < 0x80) {
            out[n++] = *p++;
            continue;
        }
        uint64_t v;
        if (rd_varint(&p, end, &v))
            return FALLBACK;
        out[n++] = (int64_t)v;
    }
    a->i64.len += n * 8;
    return OK;
}

/* Append the values of the BytesList/FloatList/Int64List in [p, end). */
static int list_values(Ptr p, Ptr end, int kind, Acc *a)
{
    while (p < end) {
        uint64_t key;
        if (*p < 0x80)
            key = *p++;
        else if (rd_tag(&p, end, &key))
            return FALLBACK;
        if (key >> 3 == 0)
            return FALLBACK;
        if (key >> 3 == 1) {
            unsigned wire = key & 7;
            if (wire == 2) {
                Ptr stop;
                if (rd_len(&p, end, &stop))
                    return FALLBACK;
                int r = OK;
                if (kind == K_BYTES) {
                    Span s = {(const char *)p, (Py_ssize_t)(stop - p)};
                    r = buf_put(&a->str, &s, sizeof s);
                }
                else if (kind == K_FLOAT) {
                    if ((stop - p) % 4)
                        return FALLBACK;
                    r = buf_put(&a->f32, p, (size_t)(stop - p));
                }
                else {
                    if (stop > p && stop[-1] >= 0x80)
                        return FALLBACK;
                    r = put_varints(a, p, stop);
                }
                if (r)
                    return r;
                p = stop;
                continue;
            }
            if (wire == 5 && kind == K_FLOAT) {
                if (end - p < 4)
                    return FALLBACK;
                if (buf_put(&a->f32, p, 4))
                    return NOMEM;
                p += 4;
                continue;
            }
            if (wire == 0 && kind == K_INT64) {
                uint64_t v;
                if (rd_varint(&p, end, &v))
                    return FALLBACK;
                if (put_i64(a, v))
                    return NOMEM;
                continue;
            }
        }
        if (skip_value(&p, end, (unsigned)(key & 7)))
            return FALLBACK;
    }
    return OK;
}

/* Decode the Feature in [p, end): append its values to ``a`` (after the mark taken on
 * entry) and return its kind and number of values. */
static int feature_values(Ptr p, Ptr end, Acc *a, int *kind_out, Py_ssize_t *count_out)
{
    Mark m = acc_mark(a);
    int kind = K_NONE;
    while (p < end) {
        uint64_t key;
        if (rd_tag(&p, end, &key))
            return FALLBACK;
        uint64_t field = key >> 3;
        if (field >= 1 && field <= 3 && (key & 7) == 2) {
            Ptr stop;
            if (rd_len(&p, end, &stop))
                return FALLBACK;
            if ((int)field != kind) { /* another oneof member replaces the current one */
                acc_truncate(a, m);
                kind = (int)field;
            }
            int r = list_values(p, stop, kind, a);
            if (r)
                return r;
            p = stop;
        }
        else if (skip_value(&p, end, (unsigned)(key & 7)))
            return FALLBACK;
    }
    *kind_out = kind;
    switch (kind) {
    case K_BYTES:
        *count_out = (Py_ssize_t)((a->str.len - m.str) / sizeof(Span));
        break;
    case K_FLOAT:
        *count_out = (Py_ssize_t)((a->f32.len - m.f32) / 4);
        break;
    case K_INT64:
        *count_out = (Py_ssize_t)((a->i64.len - m.i64) / 8);
        break;
    default:
        *count_out = 0;
    }
    return OK;
}

/* ------------------------------------------------------------------ Example structure */

typedef int (*EntryFn)(void *ctx, Ptr key, size_t klen, Ptr fs, Ptr fe);

/* A map entry in [p, end): its key and the range of its Feature. */
static int map_entry(Ptr p, Ptr end, Ptr *key, size_t *klen, Ptr *fs, Ptr *fe)
{
    int have_key = 0, have_value = 0;
    *key = p;
    *klen = 0;
    *fs = *fe = end; /* an absent value is an empty Feature */
    while (p < end) {
        uint64_t k;
        Ptr stop;
        if (rd_tag(&p, end, &k))
            return FALLBACK;
        if ((k != 0x0A && k != 0x12) || rd_len(&p, end, &stop))
            return FALLBACK;
        if (k == 0x0A) {
            if (have_key++)
                return FALLBACK;
            *key = p;
            *klen = (size_t)(stop - p);
        }
        else {
            if (have_value++)
                return FALLBACK;
            *fs = p;
            *fe = stop;
        }
        p = stop;
    }
    return OK;
}

/* Move *p to the body of the next field 1 (length-delimited) of the message that ends at
 * `end`, skipping other fields, and set *stop to the end of that body. Returns 1 when
 * there is one, 0 at the end of the message, -1 on damaged data. */
static int next_field1(Ptr *p, Ptr end, Ptr *stop)
{
    while (*p < end) {
        if (**p != 0x0A) {
            if (skip_field(p, end))
                return -1;
            continue;
        }
        (*p)++;
        return rd_len(p, end, stop) ? -1 : 1;
    }
    return 0;
}

static int walk_features(Ptr p, Ptr end, EntryFn fn, void *ctx)
{
    Ptr stop;
    int found;
    while ((found = next_field1(&p, end, &stop)) > 0) {
        Ptr key, fs, fe;
        size_t klen;
        if (map_entry(p, stop, &key, &klen, &fs, &fe))
            return FALLBACK;
        int r = fn(ctx, key, klen, fs, fe);
        if (r)
            return r;
        p = stop;
    }
    return found < 0 ? FALLBACK : OK;
}

static int walk_example(Ptr p, Ptr end, EntryFn fn, void *ctx)
{
    Ptr stop;
    int found;
    while ((found = next_field1(&p, end, &stop)) > 0) {
        int r = walk_features(p, stop, fn, ctx);
        if (r)
            return r;
        p = stop;
    }
    return found < 0 ? FALLBACK : OK;
}

/* ------------------------------------------------------------------ Python values */

static PyObject *numeric_array(const char *data, Py_ssize_t nbytes, PyObject *dtype)
{
    PyObject *raw = PyByteArray_FromStringAndSize(data, nbytes);
    if (raw == NULL)
        return NULL;
    PyObject *args[2] = {raw, dtype};
    PyObject *arr = PyObject_Vectorcall(g_frombuffer, args, 2, NULL);
    Py_DECREF(raw);
    return arr;
}

static PyObject *bytes_list(const Span *spans, Py_ssize_t n)
{
    PyObject *out = PyList_New(n);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *b = PyBytes_FromStringAndSize(spans[i].ptr, spans[i].len);
        if (b == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, b);
    }
    return out;
}

/* ------------------------------------------------------------------ decode_example */

typedef struct {
    PyObject *out; /* dict */
    Acc acc;       /* scratch for one Feature */
} Decode;

static int decode_entry(void *vctx, Ptr key, size_t klen, Ptr fs, Ptr fe)
{
    Decode *ctx = vctx;
    Acc *a = &ctx->acc;
    int kind;
    Py_ssize_t count;
    acc_truncate(a, (Mark){0, 0, 0});
    int r = feature_values(fs, fe, a, &kind, &count);
    if (r)
        return r;
    PyObject *name = PyUnicode_DecodeUTF8((const char *)key, (Py_ssize_t)klen, NULL);
    if (name == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
            return NOMEM;
        PyErr_Clear();
        return FALLBACK;
    }
    PyObject *value;
    switch (kind) {
    case K_BYTES:
        value = count ? bytes_list((const Span *)a->str.data, count)
                      : PyObject_CallNoArgs(g_byteslist);
        break;
    case K_FLOAT:
        value = numeric_array(a->f32.data, count * 4, g_float32);
        break;
    case K_INT64:
        value = numeric_array(a->i64.data, count * 8, g_int64);
        break;
    default:
        value = Py_NewRef(Py_None);
    }
    if (value == NULL) {
        Py_DECREF(name);
        return NOMEM; /* an exception is set */
    }
    r = PyDict_SetItem(ctx->out, name, value);
    Py_DECREF(name);
    Py_DECREF(value);
    return r ? NOMEM : OK;
}

static int check_configured(void)
{
    if (g_frombuffer == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "feedline.formats.example._wire: call configure() first");
        return -1;
    }
    return 0;
}

static PyObject *decode_example(PyObject *self, PyObject *arg)
{
    (void)self;
    if (check_configured() < 0)
        return NULL;
    if (!PyBytes_CheckExact(arg))
        Py_RETURN_NONE;
    Decode ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.out = PyDict_New();
    if (ctx.out == NULL)
        return NULL;
    Ptr p = (Ptr)PyBytes_AS_STRING(arg);
    int r = walk_example(p, p + PyBytes_GET_SIZE(arg), decode_entry, &ctx);
    acc_free(&ctx.acc);
    if (r == OK)
        return ctx.out;
    Py_DECREF(ctx.out);
    if (r == FALLBACK)
        Py_RETURN_NONE;
    if (!PyErr_Occurred())
        PyErr_NoMemory();
    return NULL;
}

/* ------------------------------------------------------------------ scan_examples */

typedef struct {
    Acc acc;
    unsigned char *kinds;
    int64_t *counts;
    Py_ssize_t last; /* the record whose values the acc holds last, or -1 */
    Mark mark;       /* where that record's values start */
    const char *key;
    size_t klen;
} Column;

typedef struct {
    Column *cols;
    Py_ssize_t ncols;
    Py_ssize_t *table; /* open addressing: column index or -1 */
    size_t mask;
    Py_ssize_t record;
} Scan;

static inline size_t key_hash(Ptr key, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ key[i]) * 1099511628211ULL;
    return (size_t)(h ^ (h >> 29));
}

static inline Column *find_column(Scan *s, Ptr key, size_t klen)
{
    size_t i = key_hash(key, klen) & s->mask;
    for (;;) {
        Py_ssize_t c = s->table[i];
        if (c < 0)
            return NULL;
        Column *col = &s->cols[c];
        if (col->klen == klen && memcmp(col->key, key, klen) == 0)
            return col;
        i = (i + 1) & s->mask;
    }
}

static int scan_entry(void *vctx, Ptr key, size_t klen, Ptr fs, Ptr fe)
{
    Scan *s = vctx;
    Column *col = find_column(s, key, klen);
    if (col == NULL)
        return OK; /* not wanted: its Feature is not read */
    Py_ssize_t i = s->record;
    if (col->last == i)
        acc_truncate(&col->acc, col->mark); /* the last entry for a key wins */
    else {
        col->last = i;
        col->mark = acc_mark(&col->acc);
    }
    int kind;
    Py_ssize_t count;
    int r = feature_values(fs, fe, &col->acc, &kind, &count);
    if (r)
        return r;
    col->kinds[i] = (unsigned char)kind;
    col->counts[i] = count;
    return OK;
}

static void scan_free(Scan *s)
{
    if (s->cols != NULL)
        for (Py_ssize_t c = 0; c < s->ncols; c++) {
            acc_free(&s->cols[c].acc);
            PyMem_RawFree(s->cols[c].kinds);
            PyMem_RawFree(s->cols[c].counts);
        }
    PyMem_RawFree(s->cols);
    PyMem_RawFree(s->table);
}

/* Columns and the key table for ``keys`` (a list of bytes, kept alive by the caller). */
static int scan_init(Scan *s, PyObject *keys, Py_ssize_t n)
{
    Py_ssize_t ncols = PyList_GET_SIZE(keys);
    size_t size = 8;
    while (size < (size_t)ncols * 2)
        size *= 2;
    s->ncols = ncols;
    s->mask = size - 1;
    s->cols = PyMem_RawCalloc((size_t)ncols + 1, sizeof(Column));
    s->table = PyMem_RawMalloc(size * sizeof(Py_ssize_t));
    if (s->cols == NULL || s->table == NULL)
        return NOMEM;
    for (size_t i = 0; i < size; i++)
        s->table[i] = -1;
    for (Py_ssize_t c = 0; c < ncols; c++) {
        PyObject *k = PyList_GET_ITEM(keys, c);
        if (!PyBytes_CheckExact(k)) {
            PyErr_SetString(PyExc_TypeError, "keys must be a list of bytes");
            return NOMEM;
        }
        Column *col = &s->cols[c];
        col->key = PyBytes_AS_STRING(k);
        col->klen = (size_t)PyBytes_GET_SIZE(k);
        col->last = -1;
        col->kinds = PyMem_RawCalloc((size_t)n + 1, 1);
        col->counts = PyMem_RawCalloc((size_t)n + 1, sizeof(int64_t));
        if (col->kinds == NULL || col->counts == NULL)
            return NOMEM;
        if (find_column(s, (Ptr)col->key, col->klen) != NULL)
            continue; /* a repeated key: the first column gets its values */
        size_t i = key_hash((Ptr)col->key, col->klen) & s->mask;
        while (s->table[i] >= 0)
            i = (i + 1) & s->mask;
        s->table[i] = c;
    }
    return OK;
}

static PyObject *column_result(Column *col, Py_ssize_t n)
{
    PyObject *out = PyTuple_New(5);
    if (out == NULL)
        return NULL;
    PyObject *items[5] = {
        PyByteArray_FromStringAndSize((const char *)col->kinds, n),
        PyByteArray_FromStringAndSize((const char *)col->counts, n * 8),
        PyByteArray_FromStringAndSize(col->acc.i64.data, (Py_ssize_t)col->acc.i64.len),
        PyByteArray_FromStringAndSize(col->acc.f32.data, (Py_ssize_t)col->acc.f32.len),
        bytes_list((const Span *)col->acc.str.data, (Py_ssize_t)(col->acc.str.len / sizeof(Span))),
    };
    int failed = 0;
    for (int i = 0; i < 5; i++) {
        if (items[i] == NULL)
            failed = 1;
        else
            PyTuple_SET_ITEM(out, i, items[i]); /* steals the reference */
    }
    if (failed)
        Py_CLEAR(out);
    return out;
}

static PyObject *scan_examples(PyObject *self, PyObject *args)
{
    PyObject *records, *keys;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &records, &PyList_Type, &keys))
        return NULL;
    /* a private copy: the records stay alive while the GIL is released */
    PyObject *held = PyList_AsTuple(records);
    if (held == NULL)
        return NULL;
    PyObject *keys_held = PyList_GetSlice(keys, 0, PyList_GET_SIZE(keys));
    if (keys_held == NULL) {
        Py_DECREF(held);
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(held);
    PyObject *result = NULL;
    Scan s;
    memset(&s, 0, sizeof s);
    Span *recs = PyMem_RawMalloc(((size_t)n + 1) * sizeof(Span));
    if (recs == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = PyTuple_GET_ITEM(held, i);
        if (!PyBytes_CheckExact(r)) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        recs[i].ptr = PyBytes_AS_STRING(r);
        recs[i].len = PyBytes_GET_SIZE(r);
    }
    if (scan_init(&s, keys_held, n)) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto done;
    }
    int r = OK;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n && r == OK; i++) {
        s.record = i;
        Ptr p = (Ptr)recs[i].ptr;
        r = walk_example(p, p + recs[i].len, scan_entry, &s);
    }
    Py_END_ALLOW_THREADS
    if (r == FALLBACK) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    if (r == NOMEM) {
        PyErr_NoMemory();
        goto done;
    }
    result = PyList_New(s.ncols);
    if (result == NULL)
        goto done;
    for (Py_ssize_t c = 0; c < s.ncols; c++) {
        /* a repeated key: the column that got the values */
        Column *col = find_column(&s, (Ptr)s.cols[c].key, s.cols[c].klen);
        PyObject *item = column_result(col, n);
        if (item == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, c, item);
    }
done:
    scan_free(&s);
    PyMem_RawFree(recs);
    Py_DECREF(keys_held);
    Py_DECREF(held);
    return result;
}

/* ------------------------------------------------------------------ encoding */

static inline size_t varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline char *wr_varint(char *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (char)((v & 0x7F) | 0x80);
        v >>= 7;
    }
    *p++ = (char)v;
    return p;
}

/* Room for a tag and a length prefix, then the caller writes ``n`` bytes. */
static char *put_header(Buf *b, unsigned char tag, size_t n)
{
    if (buf_reserve(b, 11 + n))
        return NULL;
    char *p = b->data + b->len;
    *p++ = (char)tag;
    p = wr_varint(p, n);
    b->len = (size_t)(p - b->data);
    return p;
}

static int write_int64s(Buf *out, const int64_t *v, Py_ssize_t n, int packed)
{
    size_t body = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        body += varint_size((uint64_t)v[i]);
    char *p;
    if (n == 0)
        return put_header(out, 0x1A, 0) ? OK : NOMEM;
    if (packed) {
        if ((p = put_header(out, 0x1A, 1 + varint_size(body) + body)) == NULL)
            return NOMEM;
        *p++ = 0x0A;
        p = wr_varint(p, body);
        for (Py_ssize_t i = 0; i < n; i++)
            p = wr_varint(p, (uint64_t)v[i]);
    }
    else {
        if ((p = put_header(out, 0x1A, body + (size_t)n)) == NULL)
            return NOMEM;
        for (Py_ssize_t i = 0; i < n; i++) {
            *p++ = 0x08;
            p = wr_varint(p, (uint64_t)v[i]);
        }
    }
    out->len = (size_t)(p - out->data);
    return OK;
}

static int write_floats(Buf *out, const float *v, Py_ssize_t n, int packed)
{
    size_t nbytes = (size_t)n * 4;
    char *p;
    if (n == 0)
        return put_header(out, 0x12, 0) ? OK : NOMEM;
    if (packed) {
        if ((p = put_header(out, 0x12, 1 + varint_size(nbytes) + nbytes)) == NULL)
            return NOMEM;
        *p++ = 0x0A;
        p = wr_varint(p, nbytes);
        memcpy(p, v, nbytes);
        p += nbytes;
    }
    else {
        if ((p = put_header(out, 0x12, (size_t)n * 5)) == NULL)
            return NOMEM;
        for (Py_ssize_t i = 0; i < n; i++) {
            *p++ = 0x0D;
            memcpy(p, &v[i], 4);
            p += 4;
        }
    }
    out->len = (size_t)(p - out->data);
    return OK;
}

static int write_strings(Buf *out, const Span *v, Py_ssize_t n)
{
    size_t body = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        body += 1 + varint_size((uint64_t)v[i].len) + (size_t)v[i].len;
    char *p = put_header(out, 0x0A, body);
    if (p == NULL)
        return NOMEM;
    for (Py_ssize_t i = 0; i < n; i++) {
        *p++ = 0x0A;
        p = wr_varint(p, (uint64_t)v[i].len);
        memcpy(p, v[i].ptr, (size_t)v[i].len);
        p += v[i].len;
    }
    out->len = (size_t)(p - out->data);
    return OK;
}

/* A Python float as float32, FALLBACK where numpy's cast would overflow (and warn). */
static inline int to_float32(double d, float *out)
{
    float f = (float)d;
    if (isinf(f) && !isinf(d))
        return FALLBACK;
    *out = f;
    return OK;
}

typedef struct {
    Buf nums; /* int64 or float32 values of one feature */
    Buf spans;
} Scratch;

/* A bytes or str item as a span (str as UTF-8); FALLBACK for anything else. */
static inline int string_span(PyObject *v, Span *s)
{
    if (PyBytes_CheckExact(v)) {
        s->ptr = PyBytes_AS_STRING(v);
        s->len = PyBytes_GET_SIZE(v);
        return OK;
    }
    if (PyUnicode_CheckExact(v)) {
        s->ptr = PyUnicode_AsUTF8AndSize(v, &s->len);
        if (s->ptr == NULL) {
            PyErr_Clear();
            return FALLBACK;
        }
        return OK;
    }
    return FALLBACK;
}

static int encode_strings(PyObject *list, Scratch *t, Buf *out)
{
    Py_ssize_t n = PyList_GET_SIZE(list);
    t->spans.len = 0;
    if (buf_reserve(&t->spans, (size_t)n * sizeof(Span)))
        return NOMEM;
    Span *s = (Span *)t->spans.data;
    for (Py_ssize_t i = 0; i < n; i++)
        if (string_span(PyList_GET_ITEM(list, i), &s[i]))
            return FALLBACK;
    return write_strings(out, s, n);
}

static int encode_list(PyObject *list, int packed, Scratch *t, Buf *out)
{
    Py_ssize_t n = PyList_GET_SIZE(list);
    PyObject *first = PyList_GET_ITEM(list, 0);
    if (PyBytes_CheckExact(first) || PyUnicode_CheckExact(first))
        return encode_strings(list, t, out);
    t->nums.len = 0;
    if (PyLong_CheckExact(first)) {
        if (buf_reserve(&t->nums, (size_t)n * 8))
            return NOMEM;
        int64_t *v = (int64_t *)t->nums.data;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *item = PyList_GET_ITEM(list, i);
            int overflow;
            if (!PyLong_CheckExact(item))
                return FALLBACK;
            v[i] = PyLong_AsLongLongAndOverflow(item, &overflow);
            if (overflow)
                return FALLBACK;
        }
        return write_int64s(out, v, n, packed);
    }
    if (PyFloat_CheckExact(first)) {
        if (buf_reserve(&t->nums, (size_t)n * 4))
            return NOMEM;
        float *v = (float *)t->nums.data;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *item = PyList_GET_ITEM(list, i);
            if (!PyFloat_CheckExact(item) || to_float32(PyFloat_AS_DOUBLE(item), &v[i]))
                return FALLBACK;
        }
        return write_floats(out, v, n, packed);
    }
    return FALLBACK;
}

/* A numpy array through the buffer protocol: native bool, integer and float32/float64
 * dtypes, C-contiguous. */
static int encode_array(PyObject *arr, int packed, Scratch *t, Buf *out)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arr, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        return FALLBACK;
    }
    const char *fmt = view.format;
    if (fmt[0] == '@' || fmt[0] == '=' || fmt[0] == '<')
        fmt++;
    int r = FALLBACK;
    Py_ssize_t n = view.itemsize ? view.len / view.itemsize : 0;
    char c = (fmt[0] != '\0' && fmt[1] == '\0') ? fmt[0] : '\0'; /* one-letter formats */
    t->nums.len = 0;
    if (c == 'f' && view.itemsize == 4) {
        r = write_floats(out, (const float *)view.buf, n, packed);
    }
    else if (c == 'd' && view.itemsize == 8) {
        if (buf_reserve(&t->nums, (size_t)n * 4) == OK) {
            float *v = (float *)t->nums.data;
            const double *src = (const double *)view.buf;
            r = OK;
            for (Py_ssize_t i = 0; i < n && r == OK; i++)
                r = to_float32(src[i], &v[i]);
            if (r == OK)
                r = write_floats(out, v, n, packed);
        }
        else
            r = NOMEM;
    }
    else if (c != '\0' && strchr("?bBhHiIlLqQ", c) != NULL) {
        int is_signed = strchr("bhilq", c) != NULL;
        Py_ssize_t size = view.itemsize;
        if (size == 8 && is_signed)
            r = write_int64s(out, (const int64_t *)view.buf, n, packed);
        else if (buf_reserve(&t->nums, (size_t)n * 8) == OK) {
            int64_t *v = (int64_t *)t->nums.data;
            const char *src = view.buf;
            r = OK;
            for (Py_ssize_t i = 0; i < n && r == OK; i++) {
                const char *q = src + i * size;
                if (c == '?') { /* a bool is 1 whatever non-zero byte holds it */
                    v[i] = *(const unsigned char *)q != 0;
                    continue;
                }
                switch (size * (is_signed ? 1 : -1)) {
                case 1: v[i] = *(const int8_t *)q; break;
                case 2: v[i] = *(const int16_t *)q; break;
                case 4: v[i] = *(const int32_t *)q; break;
                case -1: v[i] = *(const uint8_t *)q; break;
                case -2: v[i] = *(const uint16_t *)q; break;
                case -4: v[i] = *(const uint32_t *)q; break;
                case -8: {
                    uint64_t u = *(const uint64_t *)q;
                    if (u > (uint64_t)INT64_MAX)
                        r = FALLBACK; /* the Python path names the value that does not fit */
                    v[i] = (int64_t)u;
                    break;
                }
                default: r = FALLBACK;
                }
            }
            if (r == OK)
                r = write_int64s(out, v, n, packed);
        }
        else
            r = NOMEM;
    }
    PyBuffer_Release(&view);
    return r;
}

/* Write the Feature of ``value`` to ``out``; FALLBACK leaves ``out`` as it was. */
static int encode_value(PyObject *value, int packed, Scratch *t, Buf *out)
{
    size_t start = out->len;
    int r = FALLBACK;
    if (value == Py_None)
        return OK;
    if (PyLong_CheckExact(value)) {
        int overflow;
        int64_t v = PyLong_AsLongLongAndOverflow(value, &overflow);
        r = overflow ? FALLBACK : write_int64s(out, &v, 1, packed);
    }
    else if (PyFloat_CheckExact(value)) {
        float f;
        r = to_float32(PyFloat_AS_DOUBLE(value), &f);
        if (r == OK)
            r = write_floats(out, &f, 1, packed);
    }
    else if (PyBytes_CheckExact(value) || PyUnicode_CheckExact(value)) {
        Span s;
        r = string_span(value, &s);
        if (r == OK)
            r = write_strings(out, &s, 1);
    }
    else if (PyList_CheckExact(value)) {
        r = PyList_GET_SIZE(value) ? encode_list(value, packed, t, out) : OK;
    }
    else if ((PyObject *)Py_TYPE(value) == g_byteslist) {
        r = encode_strings(value, t, out);
    }
    else if ((PyObject *)Py_TYPE(value) == g_ndarray) {
        r = encode_array(value, packed, t, out);
    }
    if (r == FALLBACK)
        out->len = start;
    return r;
}

/* The Feature of ``value`` by the Python encoder, appended to ``out``. */
static int encode_in_python(PyObject *name, PyObject *value, PyObject *packed, Buf *out)
{
    PyObject *args[3] = {name, value, packed};
    PyObject *feature = PyObject_Vectorcall(g_feature_bytes, args, 3, NULL);
    if (feature == NULL)
        return -1;
    if (!PyBytes_Check(feature)) {
        Py_DECREF(feature);
        PyErr_SetString(PyExc_TypeError, "feature_bytes must return bytes");
        return -1;
    }
    int r = buf_put(out, PyBytes_AS_STRING(feature), (size_t)PyBytes_GET_SIZE(feature));
    Py_DECREF(feature);
    if (r) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* Append the map entry of ``name`` (UTF-8 ``key``) and the Feature in ``feat``. */
static int put_entry(Buf *body, const char *key, Py_ssize_t klen, const Buf *feat)
{
    size_t inner = 1 + varint_size((uint64_t)klen) + (size_t)klen + 1 +
                   varint_size(feat->len) + feat->len;
    char *p = put_header(body, 0x0A, inner);
    if (p == NULL)
        return NOMEM;
    *p++ = 0x0A;
    p = wr_varint(p, (uint64_t)klen);
    memcpy(p, key, (size_t)klen);
    p += klen;
    *p++ = 0x12;
    p = wr_varint(p, feat->len);
    if (feat->len)
        memcpy(p, feat->data, feat->len);
    p += feat->len;
    body->len = (size_t)(p - body->data);
    return OK;
}

static PyObject *encode_example(PyObject *self, PyObject *args)
{
    PyObject *features, *packed_obj;
    (void)self;
    if (!PyArg_ParseTuple(args, "OO", &features, &packed_obj))
        return NULL;
    if (check_configured() < 0)
        return NULL;
    if (!PyDict_CheckExact(features))
        Py_RETURN_NONE;
    int packed = PyObject_IsTrue(packed_obj);
    if (packed < 0)
        return NULL;
    Py_ssize_t size = PyDict_GET_SIZE(features);
    if (size == 0)
        return PyBytes_FromStringAndSize(NULL, 0);
    Buf body, feat;
    memset(&body, 0, sizeof body);
    memset(&feat, 0, sizeof feat);
    Scratch t;
    memset(&t, 0, sizeof t);
    PyObject *result = NULL;
    Py_ssize_t pos = 0;
    PyObject *name, *value;
    while (PyDict_Next(features, &pos, &name, &value)) {
        Py_ssize_t klen;
        const char *key;
        if (!PyUnicode_CheckExact(name) || (key = PyUnicode_AsUTF8AndSize(name, &klen)) == NULL) {
            PyErr_Clear();
            result = Py_NewRef(Py_None);
            goto done;
        }
        feat.len = 0;
        int r = encode_value(value, packed, &t, &feat);
        if (r == NOMEM) {
            PyErr_NoMemory();
            goto done;
        }
        if (r == FALLBACK) {
            /* Python code runs: hold the name (and its UTF-8 bytes) and the value */
            Py_INCREF(name);
            Py_INCREF(value);
            r = encode_in_python(name, value, packed_obj, &feat);
            if (r == 0 && PyDict_GET_SIZE(features) != size) {
                PyErr_SetString(PyExc_RuntimeError, "dictionary changed size during iteration");
                r = -1;
            }
            if (r == 0 && put_entry(&body, key, klen, &feat)) {
                PyErr_NoMemory();
                r = -1;
            }
            Py_DECREF(name);
            Py_DECREF(value);
            if (r < 0)
                goto done;
            continue;
        }
        if (put_entry(&body, key, klen, &feat)) {
            PyErr_NoMemory();
            goto done;
        }
    }
    result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(1 + varint_size(body.len) + body.len));
    if (result != NULL) {
        char *p = PyBytes_AS_STRING(result);
        *p++ = 0x0A;
        p = wr_varint(p, body.len);
        if (body.len) /* an Example without features: body.data may be NULL */
            memcpy(p, body.data, body.len);
    }
done:
    buf_free(&body);
    buf_free(&feat);
    buf_free(&t.nums);
    buf_free(&t.spans);
    return result;
}

/* ------------------------------------------------------------------ module */

static PyObject *configure(PyObject *self, PyObject *args)
{
    PyObject *objs[6];
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOO", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4],
                          &objs[5]))
        return NULL;
    if (!PyType_Check(objs[3]) || !PyType_Check(objs[4])) {
        PyErr_SetString(PyExc_TypeError, "BytesList and ndarray must be types");
        return NULL;
    }
    PyObject **slots[6] = {&g_frombuffer, &g_int64,   &g_float32,
                           &g_byteslist,  &g_ndarray, &g_feature_bytes};
    for (int i = 0; i < 6; i++)
        Py_XSETREF(*slots[i], Py_NewRef(objs[i]));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(frombuffer, int64, float32, BytesList, ndarray, feature_bytes): set up once."},
    {"decode_example", decode_example, METH_O,
     "decode_example(record) -> {name: value}, or None where the Python decoder must run."},
    {"scan_examples", scan_examples, METH_VARARGS,
     "scan_examples(records, keys) -> per key (kinds, counts, int64s, float32s, strings), or None."},
    {"encode_example", encode_example, METH_VARARGS,
     "encode_example(features, packed) -> bytes, or None where the Python encoder must run."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_wire", "tf.train.Example wire format in C (see _wire.c).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__wire(void)
{
    return PyModule_Create(&module);
}
