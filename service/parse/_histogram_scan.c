/* Finds the delay histograms in perfSONAR message bodies and converts them to numbers in C.
 *
 * A histogram-owdelay datapoint is a JSON object of bucket delay (a decimal number written as a
 * string key) to packet count: {"2.61": 38, "2.62": 37, ...}, about a hundred buckets a minute.
 * Decoding it with a JSON library builds a Python string, an integer and a dictionary slot per
 * bucket, which is most of the cost of ingesting a message. `scan` instead recognises histogram
 * objects of the plain form toolkits write, converts their buckets straight into packed arrays,
 * and returns each body with every recognised object replaced by a short placeholder string
 * ("\u0000<index>"), which the caller decodes with its JSON library as before.
 *
 * Only the plain form is recognised; any other text is left in place for the general parser:
 *   object  = '{' ws pair (ws ',' ws pair)* ws '}'
 *   pair    = '"' key '"' ws ':' ws count
 *   key     = '-'? digit+ ('.' digit+)?   with at most 15 digits in all
 *   count   = '0' | [1-9] digit{0,8}       (a JSON integer below 10^9)
 *   ws      = (' ' | '\t' | '\n' | '\r')*
 * A key of at most 15 digits is an integer mantissa m < 2^53 over 10^k with k <= 15; both are
 * exact doubles and IEEE division rounds correctly, so m / 10^k is bit for bit what Python's
 * float(key) returns. Bodies holding a backslash are left whole: without one, no string of the
 * body can decode to a placeholder. The caller must still check that every placeholder of a body
 * came back as a datapoint's value (see service/parse/histogram_scan.py); then the body was valid
 * JSON of the same shape with the histograms in those places.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_KEY_DIGITS 15
#define MAX_COUNT_DIGITS 9

static const double POWERS_OF_TEN[MAX_KEY_DIGITS + 1] = {
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
};

/* A growable byte buffer. */
typedef struct {
    char *data;
    size_t length;
    size_t capacity;
} Buffer;

static int buffer_reserve(Buffer *buffer, size_t extra)
{
    if (buffer->capacity - buffer->length >= extra) {
        return 0;
    }
    size_t capacity = buffer->capacity ? buffer->capacity : 4096;
    while (capacity - buffer->length < extra) {
        if (capacity > SIZE_MAX / 2) {
            return -1;
        }
        capacity *= 2;
    }
    char *data = realloc(buffer->data, capacity);
    if (data == NULL) {
        return -1;
    }
    buffer->data = data;
    buffer->capacity = capacity;
    return 0;
}

static int buffer_append(Buffer *buffer, const void *source, size_t size)
{
    if (buffer_reserve(buffer, size) < 0) {
        return -1;
    }
    memcpy(buffer->data + buffer->length, source, size);
    buffer->length += size;
    return 0;
}

static inline int is_digit(char c) { return (unsigned char)(c - '0') < 10; }

static inline const char *skip_whitespace(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) {
        p++;
    }
    return p;
}

/* The numbers a scan produces: bucket delays and counts, and each histogram's bucket count. */
typedef struct {
    Buffer delays;  /* double */
    Buffer counts;  /* int64_t */
    Buffer lengths; /* int64_t */
} Histograms;

/* Outcome of scanning one histogram object. */
typedef enum { NOT_PLAIN, PLAIN, OUT_OF_MEMORY } ScanOutcome;

/* Scans the object whose '{' is at `p`. PLAIN: its buckets were appended and `*after` points
 * past its '}'. Otherwise nothing was appended. */
static ScanOutcome scan_histogram(const char *p, const char *end, Histograms *out,
                                  const char **after)
{
    const size_t delays_before = out->delays.length, counts_before = out->counts.length;
    int64_t buckets = 0;
    p = skip_whitespace(p + 1, end);
    for (;;) {
        if (p >= end || *p != '"') {
            goto not_plain;
        }
        p++;
        const int negative = p < end && *p == '-';
        p += negative;
        uint64_t mantissa = 0;
        int digits = 0, decimals = 0;
        while (p < end && is_digit(*p) && digits <= MAX_KEY_DIGITS) {
            mantissa = mantissa * 10 + (uint64_t)(*p++ - '0');
            digits++;
        }
        if (digits == 0) {
            goto not_plain;
        }
        if (p < end && *p == '.') {
            p++;
            while (p < end && is_digit(*p) && digits <= MAX_KEY_DIGITS) {
                mantissa = mantissa * 10 + (uint64_t)(*p++ - '0');
                digits++;
                decimals++;
            }
            if (decimals == 0) {
                goto not_plain;
            }
        }
        if (digits > MAX_KEY_DIGITS || p >= end || *p != '"') {
            goto not_plain;
        }
        p = skip_whitespace(p + 1, end);
        if (p >= end || *p != ':') {
            goto not_plain;
        }
        p = skip_whitespace(p + 1, end);
        if (p >= end || !is_digit(*p)) {
            goto not_plain;
        }
        int64_t count = 0;
        int count_digits = 0;
        while (p < end && is_digit(*p) && count_digits <= MAX_COUNT_DIGITS) {
            count = count * 10 + (*p++ - '0');
            count_digits++;
        }
        if (count_digits > MAX_COUNT_DIGITS || (p < end && is_digit(*p)) ||
            (count_digits > 1 && p[-count_digits] == '0')) {
            goto not_plain; /* too long, or a leading zero (not JSON) */
        }
        double delay = (double)mantissa / POWERS_OF_TEN[decimals];
        if (negative) {
            delay = -delay;
        }
        if (buffer_append(&out->delays, &delay, sizeof delay) < 0 ||
            buffer_append(&out->counts, &count, sizeof count) < 0) {
            out->delays.length = delays_before;
            out->counts.length = counts_before;
            return OUT_OF_MEMORY;
        }
        buckets++;
        p = skip_whitespace(p, end);
        if (p < end && *p == ',') {
            p = skip_whitespace(p + 1, end);
            continue;
        }
        if (p < end && *p == '}') {
            if (buffer_append(&out->lengths, &buckets, sizeof buckets) < 0) {
                out->delays.length = delays_before;
                out->counts.length = counts_before;
                return OUT_OF_MEMORY;
            }
            *after = p + 1;
            return PLAIN;
        }
        goto not_plain;
    }
not_plain:
    out->delays.length = delays_before;
    out->counts.length = counts_before;
    return NOT_PLAIN;
}

/* Scans one body: appends its text with placeholders to `text` when it holds a plain histogram.
 * Returns how many it replaced (their indexes start at `first`), or -1 when out of memory. */
static Py_ssize_t scan_body(const char *body, size_t size, int64_t first, Buffer *text,
                            Histograms *out)
{
    if (memchr(body, '\\', size) != NULL) {
        return 0;
    }
    const char *end = body + size, *copied = body, *p = body, *brace;
    const size_t text_before = text->length;
    Py_ssize_t placed = 0;
    while ((brace = memchr(p, '{', (size_t)(end - p))) != NULL) {
        const char *after = NULL;
        const ScanOutcome outcome = scan_histogram(brace, end, out, &after);
        if (outcome == OUT_OF_MEMORY) {
            return -1;
        }
        if (outcome == NOT_PLAIN) {
            p = brace + 1;
            continue;
        }
        char placeholder[32];
        const int length =
            snprintf(placeholder, sizeof placeholder, "\"\\u0000%lld\"", (long long)(first + placed));
        if (buffer_append(text, copied, (size_t)(brace - copied)) < 0 ||
            buffer_append(text, placeholder, (size_t)length) < 0) {
            return -1;
        }
        copied = p = after;
        placed++;
    }
    if (placed > 0 && buffer_append(text, copied, (size_t)(end - copied)) < 0) {
        return -1;
    }
    if (placed == 0) {
        text->length = text_before;
    }
    return placed;
}

static PyObject *bytes_of(const Buffer *buffer)
{
    return PyBytes_FromStringAndSize(buffer->data ? buffer->data : "", (Py_ssize_t)buffer->length);
}

PyDoc_STRVAR(scan_doc,
"scan(bodies) -> (documents, placed, delays, counts, lengths)\n\n"
"Replace the plain histogram objects of each bytes body by placeholder strings \"\\u0000<i>\"\n"
"(i counts histograms across the whole batch). `documents[j]` is body j with its\n"
"placeholders (the body itself when it has none); `placed` (int64 per body) says how many it\n"
"has; `delays` (float64), `counts` (int64) hold every histogram's buckets in order and\n"
"`lengths` (int64) each histogram's number of buckets. The scan runs without the GIL.");

static PyObject *scan(PyObject *module, PyObject *argument)
{
    (void)module;
    PyObject *bodies = PySequence_Tuple(argument); /* holds the bodies while the GIL is released */
    if (bodies == NULL) {
        return NULL;
    }
    const Py_ssize_t n = PyTuple_GET_SIZE(bodies);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(bodies, i))) {
            Py_DECREF(bodies);
            return PyErr_Format(PyExc_TypeError, "body %zd is not bytes", i);
        }
    }
    Buffer text = {0};
    Histograms out = {{0}, {0}, {0}};
    int64_t *placed = PyMem_RawCalloc((size_t)n + 1, sizeof *placed);
    size_t *text_ends = PyMem_RawCalloc((size_t)n + 1, sizeof *text_ends);
    PyObject *result = NULL;
    int failed = placed == NULL || text_ends == NULL;
    if (!failed) {
        Py_BEGIN_ALLOW_THREADS
        int64_t histograms = 0;
        for (Py_ssize_t i = 0; i < n && !failed; i++) {
            PyObject *body = PyTuple_GET_ITEM(bodies, i);
            const Py_ssize_t count = scan_body(PyBytes_AS_STRING(body),
                                               (size_t)PyBytes_GET_SIZE(body), histograms, &text,
                                               &out);
            failed = count < 0;
            placed[i] = count;
            histograms += count;
            text_ends[i] = text.length;
        }
        Py_END_ALLOW_THREADS
    }
    if (failed) {
        PyErr_NoMemory();
        goto done;
    }
    PyObject *documents = PyList_New(n);
    if (documents == NULL) {
        goto done;
    }
    size_t start = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *document;
        if (placed[i] > 0) {
            document = PyBytes_FromStringAndSize(text.data + start,
                                                 (Py_ssize_t)(text_ends[i] - start));
            if (document == NULL) {
                Py_DECREF(documents);
                goto done;
            }
        } else {
            document = Py_NewRef(PyTuple_GET_ITEM(bodies, i));
        }
        PyList_SET_ITEM(documents, i, document);
        start = text_ends[i];
    }
    PyObject *items[5] = {
        documents,
        PyBytes_FromStringAndSize((const char *)placed, n * (Py_ssize_t)sizeof *placed),
        bytes_of(&out.delays),
        bytes_of(&out.counts),
        bytes_of(&out.lengths),
    };
    if (items[1] != NULL && items[2] != NULL && items[3] != NULL && items[4] != NULL) {
        result = PyTuple_New(5);
    }
    for (int i = 0; i < 5; i++) {
        if (result != NULL) {
            PyTuple_SET_ITEM(result, i, items[i]);
        } else {
            Py_XDECREF(items[i]);
        }
    }
done:
    free(text.data);
    free(out.delays.data);
    free(out.counts.data);
    free(out.lengths.data);
    PyMem_RawFree(placed);
    PyMem_RawFree(text_ends);
    Py_DECREF(bodies);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_O, scan_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_histogram_scan",
    "Plain perfSONAR delay histograms from message bodies to packed numbers, in C.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__histogram_scan(void) { return PyModule_Create(&module); }
