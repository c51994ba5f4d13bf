/*
 * feedline.image._kernels: per-pixel loops numpy would run in several passes, or slowly.
 *
 * normalize_chw(src, dst, scale, bias) -> None
 *   src:   a uint8 (H, W, C) array, any strides (a flipped or cropped view is fine)
 *   dst:   a writable C-contiguous float32 (C, H, W) array
 *   scale, bias: sequences of C floats
 *   dst[c, y, x] = (float)src[y, x, c] * scale[c] + bias[c] in float32 arithmetic, the
 *   product rounded before the sum (no fused multiply-add: built with -ffp-contract=off),
 *   so the result is bit-identical to numpy's float32 multiply, then add. One pass over
 *   the pixels; the GIL is released. C is 1 to 4.
 *   On x86-64 CPUs with AVX2 (checked at run time) 3-channel images whose pixels are
 *   packed (x stride +3 or, flipped, -3; channel stride 1; any row stride) run on AVX2
 *   code: 32 pixels at a time deinterleaved with byte shuffles (see "packed 3-channel
 *   rows" below), widened to float32 (vpmovzxbd, vcvtdq2ps), multiplied, then added
 *   (vmulps, then vaddps: two roundings, as the portable loop; never a fused
 *   multiply-add), so bit-identical as well. Other layouts run the portable loop.
 *
 * hwc_to_chw(src, dst) -> None
 *   src:   a uint8 (H, W, C) array, any strides (flipped or cropped views), C 1 to 4
 *   dst:   a writable C-contiguous uint8 (C, H, W) array, not overlapping src
 *   dst[c, y, x] = src[y, x, c]: the layout change of a CHW batch row, an exact copy; the
 *   GIL is released. Packed 3-channel images (as for normalize_chw) run on AVX2 code where
 *   the CPU has it: 32 pixels deinterleaved at a time (then 16 with the 128-bit shuffles,
 *   then one by one); everything else runs a portable strided copy, a channel at a time.
 *
 * normalize_chw and hwc_to_chw raise ValueError for arrays of another dtype, rank or shape.
 *
 * resample(src, dst, box, filter) -> None
 *   src:    a uint8 (H, W, C) array, C 1 or 3, pixels contiguous within a row (any row
 *           stride: a crop view is fine)
 *   dst:    a writable C-contiguous uint8 (OH, OW, C) array
 *   box:    (x0, y0, x1, y1), the source region to resize, possibly fractional: checked
 *           as the doubles Python passes (finite, inside the image, not reversed; sides
 *           up to 2**24 pixels), then held as float32 as Pillow holds it
 *   filter: 0 box, 1 bilinear, 2 hamming, 3 bicubic, 4 lanczos
 *   dst = Pillow's (13 and later) Image.resize((OW, OH), filter, box=box) of src, bit for
 *   bit: the same convolution (support scaled by the reduction, 22-bit fixed-point weights
 *   computed in double precision), the same order of the two passes (the horizontal one
 *   first, over only the rows the vertical one reads, unless the height shrinks by more
 *   than twice as many pixels as the width), each pass rounding to uint8, and a plain copy
 *   for a whole-pixel box of the output's size. Integer sums do not depend on their
 *   order, so the loops may run in any order and vectorise. The GIL is released.
 *   On x86-64 CPUs with AVX2 (checked at run time; the build stays portable) both passes
 *   run on AVX2 code, the same int32 products and sums 8 lanes at a time:
 *   - horizontal: 8 rows at a time. The source bytes the taps read are transposed with
 *     byte shuffles so that each byte column holds its 8 rows' values side by side; a sum
 *     is then a vector of 8 rows (vpmovzxbd, vpmulld by the broadcast weight, vpaddd), and
 *     the sums of 16 output pixels are rounded, packed and transposed back into the 8
 *     rows. Short filters (6 taps or fewer) go over a fixed number of taps per pixel, the
 *     shorter ones padded with zero weights, so that the loop does not branch on the count.
 *   - vertical: 64 or 32 values of an output row at a time, the sums in registers.
 *   The last block of a row overlaps the one before instead of running past its end.
 *   The rounding is an arithmetic shift and the clamp to 0..255 the saturation of the
 *   int32 -> int16 -> uint8 packs, as the portable code's clip8. Images too small for the
 *   blocks (fewer than 16 output pixels or source bytes a row, fewer than 32 values a row
 *   in the vertical pass) run the portable loops, which stay the fallback elsewhere.
 *
 * _set_simd(on) -> bool
 *   A test hook: use the AVX2 code of the three kernels (where the CPU has it; the default)
 *   or the portable loops; returns whether the AVX2 code is in use from now on. Not
 *   thread-safe: for tests.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CHANNELS 4

/* The AVX2 code: built where the compiler can target it (per function, so the rest of the
 * build stays portable) and chosen at run time (__builtin_cpu_supports); simd_enabled is
 * set when the module loads and by _set_simd(). */
#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_AVX2_PASSES 1
#include <immintrin.h>

#define AVX2_FN __attribute__((target("avx2")))
#define AVX2_INLINE static inline __attribute__((target("avx2"), always_inline))

static int simd_enabled = 0;
#endif

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

/* Gets src as a uint8 (H, W, C) array of 1 to 4 channels, any strides, and dst as a
 * writable C-contiguous (C, H, W) array of the given item (format "B" or "f"). Returns 0,
 * or -1 with an exception set and neither buffer held. */
static int get_hwc_chw(PyObject *src_obj, PyObject *dst_obj, Py_buffer *src, Py_buffer *dst,
                       const char *format, Py_ssize_t itemsize, const char *dst_problem)
{
    if (PyObject_GetBuffer(src_obj, src, PyBUF_STRIDED_RO | PyBUF_FORMAT) < 0)
        return -1;
    if (PyObject_GetBuffer(dst_obj, dst, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE | PyBUF_FORMAT) <
        0) {
        PyBuffer_Release(src);
        return -1;
    }
    const char *problem = NULL;
    if (src->ndim != 3 || src->itemsize != 1 || strcmp(src->format, "B") != 0)
        problem = "src must be a uint8 (H, W, C) array";
    else if (dst->ndim != 3 || dst->itemsize != itemsize || strcmp(dst->format, format) != 0)
        problem = dst_problem;
    else if (src->shape[2] < 1 || src->shape[2] > MAX_CHANNELS)
        problem = "src must have 1 to 4 channels";
    else if (dst->shape[0] != src->shape[2] || dst->shape[1] != src->shape[0] ||
             dst->shape[2] != src->shape[1])
        problem = "dst's shape must be src's (H, W, C) as (C, H, W)";
    if (problem != NULL) {
        PyBuffer_Release(src);
        PyBuffer_Release(dst);
        PyErr_SetString(PyExc_ValueError, problem);
        return -1;
    }
    return 0;
}

/* ------------------------------------------- packed 3-channel rows: deinterleaving
 * A row of 3-channel pixels with an x stride of +3 or -3 bytes and a channel stride of 1
 * (a contiguous row, or the same row flipped) holds 16 pixels in 48 consecutive bytes:
 * pixels x..x+15 start at row + 3x, or, flipped, at row - 3(x + 15) and in reverse order.
 * Three 16-byte loads of them and nine byte shuffles (pshufb: a mask byte with the high
 * bit set gives 0) ORed by channel give each channel's 16 values in pixel order:
 * deinterleave_masks[flipped][j][k][i] is the byte of load j that holds channel k of the
 * block's pixel i, or 0x80 where load j holds none. On AVX2 two blocks of 16 go side by
 * side in the two 128-bit lanes (the shuffles work within lanes), 32 pixels at a time. */
static unsigned char deinterleave_masks[2][3][3][16];

static void init_deinterleave_masks(void)
{
    for (int flipped = 0; flipped < 2; flipped++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 3; k++)
                for (int i = 0; i < 16; i++) {
                    const int at = 3 * (flipped ? 15 - i : i) + k; /* in the 48 bytes */
                    deinterleave_masks[flipped][j][k][i] =
                        (unsigned char)(at / 16 == j ? at % 16 : 0x80);
                }
}

/* where the 48 bytes of pixels x..x+15 of a packed row start */
static inline const unsigned char *block16(const unsigned char *row, int flipped, Py_ssize_t x)
{
    return flipped ? row - 3 * (x + 15) : row + 3 * x;
}

#ifdef HAVE_AVX2_PASSES
/* the nine shuffles, the same in both lanes */
AVX2_INLINE void load_deinterleave_masks(int flipped, __m256i m[9])
{
    for (int j = 0; j < 3; j++)
        for (int k = 0; k < 3; k++)
            m[3 * j + k] = _mm256_broadcastsi128_si256(
                _mm_loadu_si128((const __m128i *)deinterleave_masks[flipped][j][k]));
}

/* channel k of pixels x..x+31 into v[k] (x..x+15 in the low lane), from the 48 bytes of
 * x..x+15 at lo and of x+16..x+31 at hi */
AVX2_INLINE void deinterleave32(const unsigned char *lo, const unsigned char *hi,
                                const __m256i m[9], __m256i v[3])
{
    __m256i in[3];
    for (int j = 0; j < 3; j++)
        in[j] = _mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(lo + 16 * j))),
            _mm_loadu_si128((const __m128i *)(hi + 16 * j)), 1);
    for (int k = 0; k < 3; k++)
        v[k] = _mm256_or_si256(
            _mm256_or_si256(_mm256_shuffle_epi8(in[0], m[k]), _mm256_shuffle_epi8(in[1], m[3 + k])),
            _mm256_shuffle_epi8(in[2], m[6 + k]));
}

/* channel k of pixels x..x+15 into v[k], from their 48 bytes at p (SSSE3 shuffles) */
AVX2_INLINE void deinterleave16(const unsigned char *p, const __m256i m[9], __m128i v[3])
{
    __m128i in[3];
    for (int j = 0; j < 3; j++)
        in[j] = _mm_loadu_si128((const __m128i *)(p + 16 * j));
    for (int k = 0; k < 3; k++)
        v[k] = _mm_or_si128(
            _mm_or_si128(_mm_shuffle_epi8(in[0], _mm256_castsi256_si128(m[k])),
                         _mm_shuffle_epi8(in[1], _mm256_castsi256_si128(m[3 + k]))),
            _mm_shuffle_epi8(in[2], _mm256_castsi256_si128(m[6 + k])));
}

/* hwc_to_chw of a packed 3-channel image (x stride -3 where flipped, else +3): 32 pixels
 * at a time, then 16, then one by one */
AVX2_FN static void chw3_u8_avx2(const unsigned char *base, Py_ssize_t sy, int flipped,
                                 Py_ssize_t h, Py_ssize_t w, unsigned char *out)
{
    __m256i m[9];
    load_deinterleave_masks(flipped, m);
    const Py_ssize_t plane = h * w, sx = flipped ? -3 : 3;
    for (Py_ssize_t y = 0; y < h; y++) {
        const unsigned char *row = base + y * sy;
        unsigned char *o = out + y * w;
        Py_ssize_t x = 0;
        for (; x + 32 <= w; x += 32) {
            __m256i v[3];
            deinterleave32(block16(row, flipped, x), block16(row, flipped, x + 16), m, v);
            for (int k = 0; k < 3; k++)
                _mm256_storeu_si256((__m256i *)(o + k * plane + x), v[k]);
        }
        if (x + 16 <= w) {
            __m128i v[3];
            deinterleave16(block16(row, flipped, x), m, v);
            for (int k = 0; k < 3; k++)
                _mm_storeu_si128((__m128i *)(o + k * plane + x), v[k]);
            x += 16;
        }
        for (; x < w; x++) {
            const unsigned char *p = row + x * sx;
            o[x] = p[0];
            o[plane + x] = p[1];
            o[2 * plane + x] = p[2];
        }
    }
}

/* 8 values (the low 8 bytes of b) to float32, times s, plus t (two roundings, as numpy's
 * multiply then add: mul and add, never a fused multiply-add), stored at o */
AVX2_INLINE void scale8(__m128i b, __m256 s, __m256 t, float *o)
{
    const __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b));
    _mm256_storeu_ps(o, _mm256_add_ps(_mm256_mul_ps(f, s), t));
}

/* normalize_chw of a packed 3-channel image (x stride -3 where flipped, else +3) */
AVX2_FN static void normalize3_avx2(const unsigned char *base, Py_ssize_t sy, int flipped,
                                    Py_ssize_t h, Py_ssize_t w, const float *scale,
                                    const float *bias, float *out)
{
    __m256i m[9];
    load_deinterleave_masks(flipped, m);
    __m256 s[3], t[3];
    for (int k = 0; k < 3; k++) {
        s[k] = _mm256_set1_ps(scale[k]);
        t[k] = _mm256_set1_ps(bias[k]);
    }
    const Py_ssize_t plane = h * w, sx = flipped ? -3 : 3;
    for (Py_ssize_t y = 0; y < h; y++) {
        const unsigned char *row = base + y * sy;
        float *o = out + y * w;
        Py_ssize_t x = 0;
        for (; x + 32 <= w; x += 32) {
            __m256i v[3];
            deinterleave32(block16(row, flipped, x), block16(row, flipped, x + 16), m, v);
            for (int k = 0; k < 3; k++) {
                float *ok = o + k * plane + x;
                const __m128i lo = _mm256_castsi256_si128(v[k]);
                const __m128i hi = _mm256_extracti128_si256(v[k], 1);
                scale8(lo, s[k], t[k], ok);
                scale8(_mm_srli_si128(lo, 8), s[k], t[k], ok + 8);
                scale8(hi, s[k], t[k], ok + 16);
                scale8(_mm_srli_si128(hi, 8), s[k], t[k], ok + 24);
            }
        }
        if (x + 16 <= w) {
            __m128i v[3];
            deinterleave16(block16(row, flipped, x), m, v);
            for (int k = 0; k < 3; k++) {
                scale8(v[k], s[k], t[k], o + k * plane + x);
                scale8(_mm_srli_si128(v[k], 8), s[k], t[k], o + k * plane + x + 8);
            }
            x += 16;
        }
        for (; x < w; x++) {
            const unsigned char *p = row + x * sx;
            for (int k = 0; k < 3; k++) {
                float v = (float)p[k] * scale[k];
                o[k * plane + x] = v + bias[k];
            }
        }
    }
}
#endif

/* whether the AVX2 code for packed 3-channel rows applies to src (and is on); flipped is
 * set to whether the x stride is -3 */
static int packed3(const Py_buffer *src, int *flipped)
{
#ifdef HAVE_AVX2_PASSES
    *flipped = src->strides[1] < 0;
    return simd_enabled && src->shape[2] == 3 && src->strides[2] == 1 &&
           (src->strides[1] == 3 || src->strides[1] == -3);
#else
    *flipped = 0;
    (void)src;
    return 0;
#endif
}

/* ------------------------------------------------------------------ normalize_chw */

static PyObject *normalize_chw(PyObject *self, PyObject *args)
{
    PyObject *src_obj, *dst_obj, *scale_obj, *bias_obj;
    Py_buffer src, dst;
    float scale[MAX_CHANNELS], bias[MAX_CHANNELS];
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOO", &src_obj, &dst_obj, &scale_obj, &bias_obj))
        return NULL;
    if (get_hwc_chw(src_obj, dst_obj, &src, &dst, "f", 4,
                    "dst must be a C-contiguous float32 (C, H, W) array") < 0)
        return NULL;
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
    int flipped;
    const int simd = packed3(&src, &flipped);
    Py_BEGIN_ALLOW_THREADS
#ifdef HAVE_AVX2_PASSES
    if (simd)
        normalize3_avx2(base, sy, flipped, h, w, scale, bias, out);
    else
#else
    (void)simd;
#endif
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

/* ------------------------------------------------------------------ hwc_to_chw */

static PyObject *hwc_to_chw(PyObject *self, PyObject *args)
{
    PyObject *src_obj, *dst_obj;
    Py_buffer src, dst;
    (void)self;
    if (!PyArg_ParseTuple(args, "OO", &src_obj, &dst_obj))
        return NULL;
    if (get_hwc_chw(src_obj, dst_obj, &src, &dst, "B", 1,
                    "dst must be a C-contiguous uint8 (C, H, W) array") < 0)
        return NULL;
    const Py_ssize_t h = src.shape[0], w = src.shape[1], c = src.shape[2];
    const Py_ssize_t sy = src.strides[0], sx = src.strides[1], sc = src.strides[2];
    const unsigned char *base = (const unsigned char *)src.buf;
    unsigned char *out = (unsigned char *)dst.buf;
    const Py_ssize_t plane = h * w;
    int flipped;
    const int simd = packed3(&src, &flipped);
    Py_BEGIN_ALLOW_THREADS
#ifdef HAVE_AVX2_PASSES
    if (simd)
        chw3_u8_avx2(base, sy, flipped, h, w, out);
    else
#else
    (void)simd;
#endif
    for (Py_ssize_t y = 0; y < h; y++) {
        const unsigned char *row = base + y * sy;
        unsigned char *o = out + y * w;
        if (c == 1 && sx == 1) {
            memcpy(o, row, (size_t)w);
        } else {
            for (Py_ssize_t k = 0; k < c; k++) {
                const unsigned char *r = row + k * sc;
                unsigned char *ok = o + k * plane;
                Py_ssize_t x = 0;
                /* unrolled by 4, the loads before the stores: about 2.5 times as fast as the
                 * plain loop here (gcc 12 -O3, 224x224x3), and faster than numpy's copy */
                for (; x + 4 <= w; x += 4) {
                    const unsigned char a = r[x * sx], b = r[(x + 1) * sx];
                    const unsigned char d = r[(x + 2) * sx], e = r[(x + 3) * sx];
                    ok[x] = a;
                    ok[x + 1] = b;
                    ok[x + 2] = d;
                    ok[x + 3] = e;
                }
                for (; x < w; x++)
                    ok[x] = r[x * sx];
            }
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ resample */

#define PRECISION_BITS 22 /* fixed-point weights: 32 bits less 8 for the pixel, 2 spare */
#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

static double filter_box(double x) { return (x > -0.5 && x <= 0.5) ? 1.0 : 0.0; }

static double filter_bilinear(double x)
{
    x = fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}

static double filter_hamming(double x)
{
    x = fabs(x);
    if (x == 0.0)
        return 1.0;
    if (x >= 1.0)
        return 0.0;
    x = x * M_PI;
    return sin(x) / x * (0.54f + 0.46f * cos(x));
}

static double filter_bicubic(double x)
{
    const double a = -0.5;
    x = fabs(x);
    if (x < 1.0)
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0)
        return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

static double sinc(double x)
{
    if (x == 0.0)
        return 1.0;
    x = x * M_PI;
    return sin(x) / x;
}

static double filter_lanczos(double x)
{
    return (-3.0 <= x && x < 3.0) ? sinc(x) * sinc(x / 3) : 0.0;
}

typedef struct {
    double (*fn)(double);
    double support;
} resample_filter;

static const resample_filter FILTERS[] = {
    {filter_box, 0.5},     {filter_bilinear, 1.0}, {filter_hamming, 1.0},
    {filter_bicubic, 2.0}, {filter_lanczos, 3.0},
};

/* The taps of each of `out` output positions over the source span [in0, in1) of an axis
 * of `in` pixels: first[i] and count[i] (the source pixels used), weights[i * ksize + t]
 * as fixed-point integers. Returns ksize, or 0 with a MemoryError set. */
static int taps(int in, float in0, float in1, int out, const resample_filter *f, int **first,
                int **count, int32_t **weights)
{
    double scale = (double)(in1 - in0) / out;
    double filterscale = scale < 1.0 ? 1.0 : scale;
    double support = f->support * filterscale;
    int ksize = (int)ceil(support) * 2 + 1;
    double *w = malloc(sizeof(double) * (size_t)ksize);
    *first = malloc(sizeof(int) * (size_t)out);
    *count = malloc(sizeof(int) * (size_t)out);
    *weights = malloc(sizeof(int32_t) * (size_t)out * (size_t)ksize);
    if (w == NULL || *first == NULL || *count == NULL || *weights == NULL) {
        free(w);
        free(*first);
        free(*count);
        free(*weights);
        PyErr_NoMemory();
        return 0;
    }
    for (int i = 0; i < out; i++) {
        double center = in0 + (i + 0.5) * scale;
        double total = 0.0, ss = 1.0 / filterscale;
        int lo = (int)(center - support + 0.5), hi = (int)(center + support + 0.5);
        if (lo < 0)
            lo = 0;
        if (hi > in)
            hi = in;
        int n = hi - lo;
        for (int t = 0; t < n; t++) {
            w[t] = f->fn((t + lo - center + 0.5) * ss);
            total += w[t];
        }
        int32_t *k = *weights + (size_t)i * ksize;
        for (int t = 0; t < ksize; t++) {
            double v = t < n ? (total != 0.0 ? w[t] / total : w[t]) : 0.0;
            k[t] = v < 0 ? (int32_t)(-0.5 + v * (1 << PRECISION_BITS))
                         : (int32_t)(0.5 + v * (1 << PRECISION_BITS));
        }
        (*first)[i] = lo;
        (*count)[i] = n < 0 ? 0 : n;
    }
    free(w);
    return ksize;
}

static inline unsigned char clip8(int32_t acc)
{
    int32_t v = acc >> PRECISION_BITS;
    return (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define VECTOR_CLONES
#endif

/* dst rows from src rows with the horizontal taps; w output pixels of c channels a row */
VECTOR_CLONES
static void resample_rows(const unsigned char *src, Py_ssize_t src_stride, int rows,
                          unsigned char *dst, Py_ssize_t dst_stride, int w, int c,
                          const int *first, const int *count, const int32_t *weights,
                          int ksize)
{
    const int32_t half = 1 << (PRECISION_BITS - 1);
    for (int y = 0; y < rows; y++) {
        const unsigned char *row = src + y * src_stride;
        unsigned char *o = dst + y * dst_stride;
        if (c == 3) {
            for (int x = 0; x < w; x++) {
                const unsigned char *p = row + 3 * first[x];
                const int32_t *k = weights + (size_t)x * ksize;
                int32_t s0 = half, s1 = half, s2 = half;
                for (int t = 0; t < count[x]; t++) {
                    s0 += p[3 * t] * k[t];
                    s1 += p[3 * t + 1] * k[t];
                    s2 += p[3 * t + 2] * k[t];
                }
                o[3 * x] = clip8(s0);
                o[3 * x + 1] = clip8(s1);
                o[3 * x + 2] = clip8(s2);
            }
        } else {
            for (int x = 0; x < w; x++) {
                const unsigned char *p = row + first[x];
                const int32_t *k = weights + (size_t)x * ksize;
                int32_t s = half;
                for (int t = 0; t < count[x]; t++)
                    s += p[t] * k[t];
                o[x] = clip8(s);
            }
        }
    }
}

/* dst rows from the vertical taps over src rows; n values per row (width times channels) */
VECTOR_CLONES
static void resample_columns(const unsigned char *src, Py_ssize_t src_stride,
                             unsigned char *dst, Py_ssize_t dst_stride, int h, Py_ssize_t n,
                             const int *first, const int *count, const int32_t *weights,
                             int ksize, int32_t *acc)
{
    const int32_t half = 1 << (PRECISION_BITS - 1);
    for (int y = 0; y < h; y++) {
        const int32_t *k = weights + (size_t)y * ksize;
        for (Py_ssize_t i = 0; i < n; i++)
            acc[i] = half;
        for (int t = 0; t < count[y]; t++) {
            const unsigned char *r = src + (Py_ssize_t)(first[y] + t) * src_stride;
            const int32_t kt = k[t];
            for (Py_ssize_t i = 0; i < n; i++)
                acc[i] += r[i] * kt;
        }
        unsigned char *o = dst + y * dst_stride;
        for (Py_ssize_t i = 0; i < n; i++)
            o[i] = clip8(acc[i]);
    }
}

/* ------------------------------------------------- resample: the AVX2 passes
 * Chosen at run time (__builtin_cpu_supports) where the compiler can build them; the two
 * functions above stay as the portable fallback, and _set_simd() switches between them so
 * that the tests run both. Both passes compute exactly the same int32 products and sums
 * as the fallback (vpmulld on 8 lanes, one lane per pixel value), only in another order,
 * so the results are the same bit for bit. The rounding shift is vpsrad and the clamp to
 * 0..255 is the saturation of the two packs (int32 -> int16 -> uint8). */
#ifdef HAVE_AVX2_PASSES
/* 8 int32 lanes from the 8 bytes at p */
AVX2_INLINE __m256i load8_u8(const unsigned char *p)
{
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
}

/* within each 128-bit lane, a 4x4 byte matrix transposed */
AVX2_INLINE __m256i transpose_4x4_bytes(__m256i v)
{
    const __m256i m = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,
                                       0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm256_shuffle_epi8(v, m);
}

/* The 16 bytes at offset j of 8 rows -> t[8 * i + r] = rows[r][j + i] (i < 16): each byte
 * column becomes 8 contiguous bytes, one a row. */
AVX2_INLINE void transpose_in(const unsigned char *const *rows, Py_ssize_t j, unsigned char *t)
{
    const __m256i pair = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    __m256i z[4];
    for (int r = 0; r < 4; r++) /* row r in the low lane, row r + 4 in the high one */
        z[r] = _mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(rows[r] + j))),
            _mm_loadu_si128((const __m128i *)(rows[r + 4] + j)), 1);
    /* 4x4 transposes of dwords (4 columns of a row) across z, then of bytes inside */
    __m256i a = _mm256_unpacklo_epi32(z[0], z[1]), b = _mm256_unpacklo_epi32(z[2], z[3]);
    __m256i c = _mm256_unpackhi_epi32(z[0], z[1]), d = _mm256_unpackhi_epi32(z[2], z[3]);
    __m256i q[4] = {_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b),
                    _mm256_unpacklo_epi64(c, d), _mm256_unpackhi_epi64(c, d)};
    for (int i = 0; i < 4; i++) /* lanes: a column's rows 0-3 and 4-7 side by side */
        _mm256_storeu_si256((__m256i *)(t + 32 * i),
                            _mm256_permutevar8x32_epi32(transpose_4x4_bytes(q[i]), pair));
}

/* The inverse: y[q] holds values 4q..4q+3 of a run of 16 (a value's rows 0-3 as 4 bytes
 * in the low lane, rows 4-7 in the high one, as two packs leave them); rows[r][j + i]
 * = value i's row r. */
AVX2_INLINE void transpose_out(const __m256i *y, unsigned char *const *rows, Py_ssize_t j)
{
    __m256i y0 = transpose_4x4_bytes(y[0]), y1 = transpose_4x4_bytes(y[1]);
    __m256i y2 = transpose_4x4_bytes(y[2]), y3 = transpose_4x4_bytes(y[3]);
    __m256i a = _mm256_unpacklo_epi32(y0, y1), b = _mm256_unpacklo_epi32(y2, y3);
    __m256i c = _mm256_unpackhi_epi32(y0, y1), d = _mm256_unpackhi_epi32(y2, y3);
    __m256i r[4] = {_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b),
                    _mm256_unpacklo_epi64(c, d), _mm256_unpackhi_epi64(c, d)};
    for (int i = 0; i < 4; i++) {
        _mm_storeu_si128((__m128i *)(rows[i] + j), _mm256_castsi256_si128(r[i]));
        _mm_storeu_si128((__m128i *)(rows[i + 4] + j), _mm256_extracti128_si256(r[i], 1));
    }
}

/* 4 vectors of 8 int32 sums -> 32 bytes, rounded and clamped: in each 128-bit lane the 4
 * values' 4 bytes one after the other (lanes 0-3 low, 4-7 high) */
AVX2_INLINE __m256i pack4(__m256i a, __m256i b, __m256i c, __m256i d)
{
    return _mm256_packus_epi16(
        _mm256_packs_epi32(_mm256_srai_epi32(a, PRECISION_BITS), _mm256_srai_epi32(b, PRECISION_BITS)),
        _mm256_packs_epi32(_mm256_srai_epi32(c, PRECISION_BITS), _mm256_srai_epi32(d, PRECISION_BITS)));
}

/* 16 output pixels from x0 on, of C channels, for the 8 rows transposed in t (whose first
 * byte column is source byte lo), each pixel over K taps (its zero weights past its count
 * included), or over its count where K is 0 */
AVX2_INLINE void rows_block(const unsigned char *t, int lo, int x0, const int C, const int K,
                            const int *first,
                            const int *count, const int32_t *weights, int ksize,
                            unsigned char *const *out)
{
    const __m256i half = _mm256_set1_epi32(1 << (PRECISION_BITS - 1));
    __m256i y[12];
    for (int i = 0; i < 16; i += 4) {
        __m256i v[12];
        for (int p = 0; p < 4; p++) {
            const int x = x0 + i + p;
            const int32_t *k = weights + (size_t)x * ksize;
            const unsigned char *s = t + 8 * ((Py_ssize_t)C * first[x] - lo);
            __m256i acc[3] = {half, half, half};
            const int taps = K ? K : count[x];
            for (int tap = 0; tap < taps; tap++) {
                const __m256i kt = _mm256_set1_epi32(k[tap]);
                for (int ch = 0; ch < C; ch++)
                    acc[ch] = _mm256_add_epi32(
                        acc[ch], _mm256_mullo_epi32(load8_u8(s + 8 * (C * tap + ch)), kt));
            }
            for (int ch = 0; ch < C; ch++)
                v[C * p + ch] = acc[ch];
        }
        for (int q = 0; q < C; q++)
            y[C * i / 4 + q] = pack4(v[4 * q], v[4 * q + 1], v[4 * q + 2], v[4 * q + 3]);
    }
    for (int q = 0; q < C; q++)
        transpose_out(y + 4 * q, out, (Py_ssize_t)C * x0 + 16 * q);
}

AVX2_INLINE void rows_avx2_c(const unsigned char *src, Py_ssize_t src_stride, int rows,
                             unsigned char *dst, Py_ssize_t dst_stride, int w, const int C,
                             const int K,
                             const int *first, const int *count, const int32_t *weights,
                             int ksize, int lo, int hi, unsigned char *t, unsigned char *spare)
{
    for (int g = 0; g < rows; g += 8) {
        const unsigned char *in[8];
        unsigned char *out[8];
        for (int r = 0; r < 8; r++) { /* past the last row: read it again, write to spare */
            in[r] = src + (Py_ssize_t)(g + r < rows ? g + r : rows - 1) * src_stride;
            out[r] = g + r < rows ? dst + (Py_ssize_t)(g + r) * dst_stride : spare;
        }
        /* the last run of 16 overlaps the one before rather than reading past hi */
        for (int j = lo; j < hi; j += 16) {
            const int jj = j + 16 <= hi ? j : hi - 16;
            transpose_in(in, jj, t + 8 * (Py_ssize_t)(jj - lo));
        }
        for (int x = 0; x < w; x += 16) /* so does the last block of 16 pixels */
            rows_block(t, lo, x + 16 <= w ? x : w - 16, C, K, first, count, weights, ksize, out);
    }
}

/* resample_rows 8 rows at a time: the source bytes the taps read are transposed so that
 * each byte column holds its 8 rows' values, one sum is a vector of 8 rows, and 16 output
 * pixels' sums are transposed back into the 8 rows. Returns 0 where it does not apply
 * (fewer than 16 output pixels or source bytes, or no memory): run resample_rows then. */
AVX2_FN static int rows_avx2(const unsigned char *src, Py_ssize_t src_stride, int rows,
                             unsigned char *dst, Py_ssize_t dst_stride, int w, int c,
                             const int *first, const int *count, const int32_t *weights,
                             int ksize)
{
    int lo = INT32_MAX, hi = 0, kmin = INT32_MAX, kmax = 0;
    for (int x = 0; x < w; x++) {
        if (count[x] < kmin)
            kmin = count[x];
        if (count[x] > kmax)
            kmax = count[x];
        if (count[x] == 0)
            continue;
        if (c * first[x] < lo)
            lo = c * first[x];
        if (c * (first[x] + count[x]) > hi)
            hi = c * (first[x] + count[x]);
    }
    if (w < 16 || hi - lo < 16)
        return 0;
    /* short runs of taps go over a fixed count, kmax, the shorter ones padded with zero
     * weights (taps() leaves them zero up to ksize) over zero bytes past hi: no branch on
     * the count; longer ones, and any pixel without taps, over each pixel's count */
    const int K = kmin > 0 && kmax <= 6 && kmax <= ksize ? kmax : 0;
    const size_t pad = (size_t)8 * c * kmax;
    unsigned char *t = malloc((size_t)(hi - lo) * 8 + pad + (size_t)w * c);
    if (t == NULL)
        return 0;
    memset(t + (size_t)(hi - lo) * 8, 0, pad);
    unsigned char *spare = t + (size_t)(hi - lo) * 8 + pad;
#define ROWS_AVX2(C, K)                                                                        \
    rows_avx2_c(src, src_stride, rows, dst, dst_stride, w, C, K, first, count, weights, ksize, \
                lo, hi, t, spare)
#define ROWS_AVX2_K(C)                                                                         \
    switch (K) {                                                                               \
    case 1: ROWS_AVX2(C, 1); break;                                                            \
    case 2: ROWS_AVX2(C, 2); break;                                                            \
    case 3: ROWS_AVX2(C, 3); break;                                                            \
    case 4: ROWS_AVX2(C, 4); break;                                                            \
    case 5: ROWS_AVX2(C, 5); break;                                                            \
    case 6: ROWS_AVX2(C, 6); break;                                                            \
    default: ROWS_AVX2(C, 0); break;                                                           \
    }
    if (c == 3) {
        ROWS_AVX2_K(3)
    } else {
        ROWS_AVX2_K(1)
    }
#undef ROWS_AVX2_K
#undef ROWS_AVX2
    free(t);
    return 1;
}

/* values i to i + 32 * B of an output row of the vertical pass, the sums in registers */
AVX2_INLINE void columns_block(const unsigned char *r, Py_ssize_t src_stride, const int32_t *k,
                               int taps, unsigned char *o, const int B)
{
    const __m256i half = _mm256_set1_epi32(1 << (PRECISION_BITS - 1));
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    __m256i a[8];
    for (int q = 0; q < 4 * B; q++)
        a[q] = half;
    for (int tap = 0; tap < taps; tap++, r += src_stride) {
        const __m256i kt = _mm256_set1_epi32(k[tap]);
        for (int q = 0; q < 4 * B; q++)
            a[q] = _mm256_add_epi32(a[q], _mm256_mullo_epi32(load8_u8(r + 8 * q), kt));
    }
    for (int b = 0; b < B; b++)
        _mm256_storeu_si256((__m256i *)(o + 32 * b),
                            _mm256_permutevar8x32_epi32(
                                pack4(a[4 * b], a[4 * b + 1], a[4 * b + 2], a[4 * b + 3]), order));
}

/* resample_columns 64 values at a time, then 32 (the last block overlapping the one
 * before). Returns 0 where a row has fewer than 32 values: run resample_columns then. */
AVX2_FN static int columns_avx2(const unsigned char *src, Py_ssize_t src_stride,
                                unsigned char *dst, Py_ssize_t dst_stride, int h, Py_ssize_t n,
                                const int *first, const int *count, const int32_t *weights,
                                int ksize)
{
    if (n < 32)
        return 0;
    for (int y = 0; y < h; y++) {
        const int32_t *k = weights + (size_t)y * ksize;
        const unsigned char *base = src + (Py_ssize_t)first[y] * src_stride;
        unsigned char *o = dst + (Py_ssize_t)y * dst_stride;
        const int taps = count[y];
        Py_ssize_t i = 0;
        for (; i + 64 <= n; i += 64)
            columns_block(base + i, src_stride, k, taps, o + i, 2);
        for (; i < n; i += 32) {
            const Py_ssize_t j = i + 32 <= n ? i : n - 32;
            columns_block(base + j, src_stride, k, taps, o + j, 1);
        }
    }
    return 1;
}
#endif

/* the two passes, on the AVX2 path where it is on and applies */
static void pass_rows(const unsigned char *src, Py_ssize_t src_stride, int rows,
                      unsigned char *dst, Py_ssize_t dst_stride, int w, int c, const int *first,
                      const int *count, const int32_t *weights, int ksize)
{
#ifdef HAVE_AVX2_PASSES
    if (simd_enabled && rows_avx2(src, src_stride, rows, dst, dst_stride, w, c, first, count,
                                  weights, ksize))
        return;
#endif
    resample_rows(src, src_stride, rows, dst, dst_stride, w, c, first, count, weights, ksize);
}

static void pass_columns(const unsigned char *src, Py_ssize_t src_stride, unsigned char *dst,
                         Py_ssize_t dst_stride, int h, Py_ssize_t n, const int *first,
                         const int *count, const int32_t *weights, int ksize, int32_t *acc)
{
#ifdef HAVE_AVX2_PASSES
    if (simd_enabled &&
        columns_avx2(src, src_stride, dst, dst_stride, h, n, first, count, weights, ksize))
        return;
#endif
    resample_columns(src, src_stride, dst, dst_stride, h, n, first, count, weights, ksize, acc);
}

/* Largest side resample accepts: every pixel coordinate is exact in a float. */
#define MAX_SIDE (1 << 24)

static PyObject *resample(PyObject *self, PyObject *args)
{
    PyObject *src_obj, *dst_obj;
    double dbox[4];
    float box[4];
    int filter;
    Py_buffer src, dst;
    (void)self;
    if (!PyArg_ParseTuple(args, "OO(dddd)i", &src_obj, &dst_obj, &dbox[0], &dbox[1], &dbox[2],
                          &dbox[3], &filter))
        return NULL;
    if (filter < 0 || filter > 4) {
        PyErr_Format(PyExc_ValueError, "filter must be 0 to 4, got %d", filter);
        return NULL;
    }
    if (PyObject_GetBuffer(src_obj, &src, PyBUF_STRIDED_RO | PyBUF_FORMAT) < 0)
        return NULL;
    if (PyObject_GetBuffer(dst_obj, &dst, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE | PyBUF_FORMAT) <
        0) {
        PyBuffer_Release(&src);
        return NULL;
    }
    const char *problem = NULL;
    if (src.ndim != 3 || src.itemsize != 1 || strcmp(src.format, "B") != 0 ||
        (src.shape[2] != 1 && src.shape[2] != 3))
        problem = "src must be a uint8 (H, W, C) array with 1 or 3 channels";
    else if (src.strides[2] != 1 || src.strides[1] != src.shape[2])
        problem = "src's pixels must be contiguous within a row";
    else if (dst.ndim != 3 || dst.itemsize != 1 || strcmp(dst.format, "B") != 0 ||
             dst.shape[2] != src.shape[2] || dst.shape[0] < 1 || dst.shape[1] < 1)
        problem = "dst must be a C-contiguous uint8 (OH, OW, C) array with src's channels";
    else if (src.shape[0] > INT32_MAX / 4 || src.shape[1] > INT32_MAX / 4 ||
             dst.shape[0] > INT32_MAX / 4 || dst.shape[1] > INT32_MAX / 4)
        problem = "image too large";
    else if (src.shape[0] > MAX_SIDE || src.shape[1] > MAX_SIDE || dst.shape[0] > MAX_SIDE ||
             dst.shape[1] > MAX_SIDE)
        problem = "image too large";
    /* checked as the doubles Python gave (NaN fails every comparison, so test what must
     * hold), then again as the floats the arithmetic uses (Pillow's precision) */
    else if (!(dbox[0] >= 0 && dbox[1] >= 0 && dbox[2] <= (double)src.shape[1] &&
               dbox[3] <= (double)src.shape[0]))
        problem = "box can't exceed the source image";
    else if (!(dbox[2] - dbox[0] >= 0 && dbox[3] - dbox[1] >= 0))
        problem = "box can't be empty";
    for (int k = 0; k < 4; k++)
        box[k] = (float)dbox[k];
    if (problem == NULL &&
        !(box[0] >= 0 && box[1] >= 0 && box[2] <= (float)src.shape[1] &&
          box[3] <= (float)src.shape[0] && box[2] >= box[0] && box[3] >= box[1]))
        problem = "box can't exceed the source image";
    if (problem != NULL) {
        PyBuffer_Release(&src);
        PyBuffer_Release(&dst);
        PyErr_SetString(PyExc_ValueError, problem);
        return NULL;
    }
    const int ih = (int)src.shape[0], iw = (int)src.shape[1], c = (int)src.shape[2];
    const int oh = (int)dst.shape[0], ow = (int)dst.shape[1];
    const resample_filter *f = &FILTERS[filter];
    const unsigned char *in = (const unsigned char *)src.buf;
    unsigned char *out = (unsigned char *)dst.buf;
    const Py_ssize_t n = (Py_ssize_t)ow * c, sy = src.strides[0];
    /* Pillow's tests, quirks included (the right edge is compared with the output size) */
    const int crop = box[0] - (int)box[0] == 0 && box[2] - box[0] == ow &&
                     box[1] - (int)box[1] == 0 && box[3] - box[1] == oh;
    const int horizontal = ow != iw || box[0] != 0 || box[2] != ow;
    const int vertical = oh != ih || box[1] != 0 || box[3] != oh;
    /* the vertical pass first where the height shrinks by more than twice the width */
    const int horizontal_first = !(ih - oh > 0 && ih - oh > (iw - ow) * 2);
    int *vfirst = NULL, *vcount = NULL, *hfirst = NULL, *hcount = NULL;
    int32_t *vweights = NULL, *hweights = NULL, *acc = NULL;
    unsigned char *tmp = NULL;
    PyObject *result = NULL;
    int vk = 0, hk = 0, row0 = 0, row1 = ih;
    if (crop) {
        Py_BEGIN_ALLOW_THREADS
        for (int y = 0; y < oh; y++)
            memcpy(out + y * n, in + (Py_ssize_t)(y + (int)box[1]) * sy + (Py_ssize_t)box[0] * c,
                   (size_t)n);
        Py_END_ALLOW_THREADS
        goto ok;
    }
    if (vertical && (vk = taps(ih, box[1], box[3], oh, f, &vfirst, &vcount, &vweights)) == 0)
        goto done;
    if (horizontal && (hk = taps(iw, box[0], box[2], ow, f, &hfirst, &hcount, &hweights)) == 0)
        goto done;
    if (vertical && horizontal_first) { /* the horizontal pass covers only the rows read */
        row0 = vfirst[0];
        row1 = vfirst[oh - 1] + vcount[oh - 1];
    }
    /* widest row the vertical pass makes: the output's, or the source's when it runs first */
    const Py_ssize_t vn = (horizontal_first ? (Py_ssize_t)ow : (Py_ssize_t)iw) * c;
    size_t tmp_size = horizontal_first ? (size_t)(row1 - row0 > 0 ? row1 - row0 : 1) * (size_t)n
                                       : (size_t)oh * (size_t)vn;
    if ((horizontal && vertical && (tmp = malloc(tmp_size)) == NULL) ||
        (vertical && (acc = malloc(sizeof(int32_t) * (size_t)vn)) == NULL)) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    if (horizontal && vertical && horizontal_first) {
        for (int y = 0; y < oh; y++)
            vfirst[y] -= row0;
        pass_rows(in + (Py_ssize_t)row0 * sy, sy, row1 - row0, tmp, n, ow, c, hfirst, hcount,
                      hweights, hk);
        pass_columns(tmp, n, out, n, oh, n, vfirst, vcount, vweights, vk, acc);
    } else if (horizontal && vertical) {
        pass_columns(in, sy, tmp, vn, oh, vn, vfirst, vcount, vweights, vk, acc);
        pass_rows(tmp, vn, oh, out, n, ow, c, hfirst, hcount, hweights, hk);
    } else if (horizontal) {
        pass_rows(in, sy, oh, out, n, ow, c, hfirst, hcount, hweights, hk);
    } else if (vertical) {
        pass_columns(in, sy, out, n, oh, n, vfirst, vcount, vweights, vk, acc);
    } else {
        for (int y = 0; y < oh; y++)
            memcpy(out + y * n, in + (Py_ssize_t)y * sy, (size_t)n);
    }
    Py_END_ALLOW_THREADS
ok:
    result = Py_None;
    Py_INCREF(result);
done:
    free(vfirst);
    free(vcount);
    free(vweights);
    free(hfirst);
    free(hcount);
    free(hweights);
    free(tmp);
    free(acc);
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    return result;
}

/* _set_simd(on) -> bool: the test hook choosing the AVX2 code of all three kernels (where
 * the machine has it) or the portable loops; returns whether the AVX2 code is used from now
 * on */
static PyObject *set_simd(PyObject *self, PyObject *arg)
{
    (void)self;
    int on = PyObject_IsTrue(arg);
    if (on < 0)
        return NULL;
#ifdef HAVE_AVX2_PASSES
    __builtin_cpu_init();
    simd_enabled = on && __builtin_cpu_supports("avx2");
    return PyBool_FromLong(simd_enabled);
#else
    return PyBool_FromLong(0);
#endif
}

static PyMethodDef methods[] = {
    {"normalize_chw", normalize_chw, METH_VARARGS,
     "normalize_chw(src, dst, scale, bias)\n"
     "dst[c, y, x] = src[y, x, c] * scale[c] + bias[c] in float32 (see the C source)."},
    {"hwc_to_chw", hwc_to_chw, METH_VARARGS,
     "hwc_to_chw(src, dst)\n"
     "dst[c, y, x] = src[y, x, c] for a uint8 (H, W, C) src of any strides (see the C source)."},
    {"resample", resample, METH_VARARGS,
     "resample(src, dst, box, filter)\n"
     "dst = Pillow's resize of src's box with the filter, bit for bit (see the C source)."},
    {"_set_simd", set_simd, METH_O,
     "_set_simd(on) -> bool\n"
     "Use the AVX2 code of resample, hwc_to_chw and normalize_chw (where supported) or\n"
     "the portable loops; returns whether the AVX2 code is now in use. A test hook: the\n"
     "default is on where supported."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kernels", "Fused per-pixel loops for the image augmenters.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__kernels(void)
{
    init_deinterleave_masks();
#ifdef HAVE_AVX2_PASSES
    __builtin_cpu_init();
    simd_enabled = __builtin_cpu_supports("avx2");
#endif
    return PyModule_Create(&module);
}
