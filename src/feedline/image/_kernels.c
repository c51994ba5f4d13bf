/*
 * feedline.image._kernels: a per-pixel loop numpy would run in several passes.
 *
 * normalize_chw(src, dst, scale, bias) -> None
 *   src:   a uint8 (H, W, C) array, any strides (a flipped or cropped view is fine)
 *   dst:   a writable C-contiguous float32 (C, H, W) array
 *   scale, bias: sequences of C floats
 *   dst[c, y, x] = (float)src[y, x, c] * scale[c] + bias[c] in float32 arithmetic, the
 *   product rounded before the sum (no fused multiply-add: built with -ffp-contract=off),
 *   so the result is bit-identical to numpy's float32 multiply, then add. One pass over
 *   the pixels; the GIL is released. C is 1 to 4.
 * Raises ValueError for arrays of another dtype, rank or shape.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

#define MAX_CHANNELS 4

static int read_floats(PyObject *obj, const char *name, float *out, Py_ssize_t n)
{
    PyObject *seq = PySequence_Fast(obj, "scale and bias must be sequences of floats");
    if (seq == NULL)
        return -1;
    if (PySequence_Fast_GET_SIZE(seq) != n) {
        PyErr_Format(PyExc_ValueError, "%s must have %zd values, got %zd", name, n,
                     PySequence_Fast_GET_SIZE(seq));
        Py_DECREF(seq);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        double v = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq, i));
        if (v == -1.0 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        out[i] = (float)v;
    }
    Py_DECREF(seq);
    return 0;
}

static PyObject *normalize_chw(PyObject *self, PyObject *args)
{
    PyObject *src_obj, *dst_obj, *scale_obj, *bias_obj;
    Py_buffer src, dst;
    float scale[MAX_CHANNELS], bias[MAX_CHANNELS];
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOO", &src_obj, &dst_obj, &scale_obj, &bias_obj))
        return NULL;
    if (PyObject_GetBuffer(src_obj, &src, PyBUF_STRIDED_RO | PyBUF_FORMAT) < 0)
        return NULL;
    if (PyObject_GetBuffer(dst_obj, &dst, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE | PyBUF_FORMAT) <
        0) {
        PyBuffer_Release(&src);
        return NULL;
    }
    const char *problem = NULL;
    if (src.ndim != 3 || src.itemsize != 1 || strcmp(src.format, "B") != 0)
        problem = "src must be a uint8 (H, W, C) array";
    else if (dst.ndim != 3 || dst.itemsize != 4 || strcmp(dst.format, "f") != 0)
        problem = "dst must be a C-contiguous float32 (C, H, W) array";
    else if (src.shape[2] < 1 || src.shape[2] > MAX_CHANNELS)
        problem = "src must have 1 to 4 channels";
    else if (dst.shape[0] != src.shape[2] || dst.shape[1] != src.shape[0] ||
             dst.shape[2] != src.shape[1])
        problem = "dst's shape must be src's (H, W, C) as (C, H, W)";
    if (problem != NULL) {
        PyBuffer_Release(&src);
        PyBuffer_Release(&dst);
        PyErr_SetString(PyExc_ValueError, problem);
        return NULL;
    }
    const Py_ssize_t h = src.shape[0], w = src.shape[1], c = src.shape[2];
    if (read_floats(scale_obj, "scale", scale, c) < 0 || read_floats(bias_obj, "bias", bias, c) < 0) {
        PyBuffer_Release(&src);
        PyBuffer_Release(&dst);
        return NULL;
    }
    const Py_ssize_t sy = src.strides[0], sx = src.strides[1], sc = src.strides[2];
    const unsigned char *base = (const unsigned char *)src.buf;
    float *out = (float *)dst.buf;
    const Py_ssize_t plane = h * w;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t y = 0; y < h; y++) {
        const unsigned char *row = base + y * sy;
        float *o = out + y * w;
        if (c == 3) {
            const float s0 = scale[0], s1 = scale[1], s2 = scale[2];
            const float b0 = bias[0], b1 = bias[1], b2 = bias[2];
            for (Py_ssize_t x = 0; x < w; x++) {
                const unsigned char *p = row + x * sx;
                float v0 = (float)p[0] * s0, v1 = (float)p[sc] * s1, v2 = (float)p[2 * sc] * s2;
                o[x] = v0 + b0;
                o[plane + x] = v1 + b1;
                o[2 * plane + x] = v2 + b2;
            }
        } else {
            for (Py_ssize_t k = 0; k < c; k++) {
                const float s = scale[k], b = bias[k];
                float *ok = o + k * plane;
                for (Py_ssize_t x = 0; x < w; x++) {
                    float v = (float)row[x * sx + k * sc] * s;
                    ok[x] = v + b;
                }
            }
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"normalize_chw", normalize_chw, METH_VARARGS,
     "normalize_chw(src, dst, scale, bias)\n"
     "dst[c, y, x] = src[y, x, c] * scale[c] + bias[c] in float32 (see the C source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kernels", "Fused per-pixel loops for the image augmenters.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__kernels(void) { return PyModule_Create(&module); }
