/*
 * feedline.image._libjpeg: decode one region of a JPEG image with libjpeg-turbo's
 * libjpeg API, at a DCT-domain scale of 1/1, 1/2, 1/4 or 1/8.
 *
 * Rows above the region are skipped (jpeg_skip_scanlines: entropy-decoded, no inverse DCT,
 * no upsampling, no colour conversion), rows below it are never read (the decompressor is
 * aborted), and only the iMCU columns that cover the region go through the inverse DCT
 * and colour conversion (jpeg_crop_scanline, with a margin of one iMCU). The pixels of
 * the region are those of a full decode at the same scale.
 *
 * decode_region(data, out, y, x, height, width, denom, gray, fast, strict) -> None
 *   data:  the JPEG bytes (any contiguous buffer)
 *   out:   a writable contiguous buffer of height * width * channels bytes (channels is
 *          1 for gray, else 3), filled row by row, RGB interleaved
 *   y, x, height, width: the region, in pixels of the image decoded at 1/denom scale
 *   denom: 1, 2, 4 or 8
 *   gray:  decode to one grey channel instead of RGB
 *   fast:  the fast integer DCT and plain (not fancy) chroma upsampling
 *   strict: any warning libjpeg raises on damaged data (a truncated file, a corrupt
 *          entropy-coded segment) becomes an error, as it does for a full decode; damage
 *          below the region is not read and so not noticed
 * Raises ValueError with libjpeg's message on bad data or a region outside the image,
 * and NotImplementedError for a colour space libjpeg cannot turn into RGB (CMYK/YCCK).
 * The GIL is released while decoding.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#define MESSAGE_SIZE (JMSG_LENGTH_MAX + 128)

enum { DECODED = 0, BAD_DATA = 1, BAD_REGION = 2, UNSUPPORTED = 3, NO_MEMORY = 4 };

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    int strict;
    char message[JMSG_LENGTH_MAX];
} ErrorManager;

static void error_exit(j_common_ptr cinfo)
{
    ErrorManager *err = (ErrorManager *)cinfo->err;
    (*cinfo->err->format_message)(cinfo, err->message);
    longjmp(err->jump, 1);
}

static void emit_message(j_common_ptr cinfo, int level)
{
    ErrorManager *err = (ErrorManager *)cinfo->err;
    if (level < 0 && err->strict) { /* a warning about damaged data */
        (*cinfo->err->format_message)(cinfo, err->message);
        longjmp(err->jump, 1);
    }
}

typedef struct {
    const unsigned char *data;
    size_t size;
    unsigned char *out;
    size_t out_size;
    int y, x, height, width, denom, gray, fast, strict;
    char message[MESSAGE_SIZE];
} Job;

/* Runs without the GIL. Returns one of the codes above; job->message says why. */
static int run(Job *job)
{
    struct jpeg_decompress_struct cinfo;
    ErrorManager err;
    JSAMPROW rows[16];
    unsigned char *volatile line = NULL; /* set after setjmp: volatile */
    volatile int started = 0;

    cinfo.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = error_exit;
    err.pub.emit_message = emit_message;
    err.strict = job->strict;
    err.message[0] = '\0';
    if (setjmp(err.jump)) {
        snprintf(job->message, MESSAGE_SIZE, "%s", err.message);
        jpeg_destroy_decompress(&cinfo);
        free(line);
        return BAD_DATA;
    }
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, job->data, (unsigned long)job->size);
    jpeg_read_header(&cinfo, TRUE);
    if (!job->gray && (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK)) {
        snprintf(job->message, MESSAGE_SIZE, "CMYK/YCCK JPEG: no RGB conversion in libjpeg");
        jpeg_destroy_decompress(&cinfo);
        return UNSUPPORTED;
    }
    cinfo.out_color_space = job->gray ? JCS_GRAYSCALE : JCS_RGB;
    cinfo.scale_num = 1;
    cinfo.scale_denom = (unsigned int)job->denom;
    cinfo.dct_method = job->fast ? JDCT_IFAST : JDCT_ISLOW;
    cinfo.do_fancy_upsampling = job->fast ? FALSE : TRUE;
    jpeg_start_decompress(&cinfo);
    started = 1;

    const int channels = cinfo.output_components;
    const int out_w = (int)cinfo.output_width, out_h = (int)cinfo.output_height;
    if (job->y < 0 || job->x < 0 || job->height <= 0 || job->width <= 0 ||
        job->y > out_h - job->height || job->x > out_w - job->width) {
        snprintf(job->message, MESSAGE_SIZE,
                 "region of %d x %d pixels at (y=%d, x=%d) is not inside the %d x %d image "
                 "decoded at 1/%d scale",
                 job->height, job->width, job->y, job->x, out_h, out_w, job->denom);
        jpeg_destroy_decompress(&cinfo);
        return BAD_REGION;
    }
    const size_t row_bytes = (size_t)job->width * (size_t)channels;
    if (job->out_size != row_bytes * (size_t)job->height) {
        snprintf(job->message, MESSAGE_SIZE, "output buffer has %zu bytes, the region needs %zu",
                 job->out_size, row_bytes * (size_t)job->height);
        jpeg_destroy_decompress(&cinfo);
        return BAD_REGION;
    }

    /* Crop to the region widened by one iMCU on each side (libjpeg widens it further to
     * iMCU boundaries): fancy chroma upsampling treats the crop's edges as the image's,
     * and the margin keeps that effect out of the region, so its pixels equal a full
     * decode's. */
    const int margin = cinfo.max_h_samp_factor * cinfo.min_DCT_scaled_size;
    const int left = job->x > margin ? job->x - margin : 0;
    const int right = out_w - (job->x + job->width) > margin ? job->x + job->width + margin : out_w;
    JDIMENSION crop_x = (JDIMENSION)left, crop_w = (JDIMENSION)(right - left);
    if (left != 0 || right != out_w)
        jpeg_crop_scanline(&cinfo, &crop_x, &crop_w);
    const size_t lead = (size_t)(job->x - (int)crop_x) * (size_t)channels;
    const int direct = (crop_w == (JDIMENSION)job->width);
    int group = cinfo.rec_outbuf_height < 1 ? 1 : cinfo.rec_outbuf_height;
    if (group > 16)
        group = 16;
    if (!direct) {
        line = malloc((size_t)crop_w * (size_t)channels * (size_t)group);
        if (line == NULL) {
            jpeg_destroy_decompress(&cinfo);
            snprintf(job->message, MESSAGE_SIZE, "out of memory");
            return NO_MEMORY;
        }
    }
    if (job->y > 0 && jpeg_skip_scanlines(&cinfo, (JDIMENSION)job->y) != (JDIMENSION)job->y) {
        snprintf(job->message, MESSAGE_SIZE, "could not skip %d rows", job->y);
        jpeg_destroy_decompress(&cinfo);
        free(line);
        return BAD_DATA;
    }
    int done = 0;
    while (done < job->height) {
        int want = job->height - done < group ? job->height - done : group;
        for (int i = 0; i < want; i++)
            rows[i] = direct ? job->out + (size_t)(done + i) * row_bytes
                             : line + (size_t)i * crop_w * (size_t)channels;
        JDIMENSION got = jpeg_read_scanlines(&cinfo, rows, (JDIMENSION)want);
        if (got == 0) {
            snprintf(job->message, MESSAGE_SIZE, "no rows left after row %d", job->y + done);
            jpeg_destroy_decompress(&cinfo);
            free(line);
            return BAD_DATA;
        }
        if (!direct)
            for (JDIMENSION i = 0; i < got; i++)
                memcpy(job->out + (size_t)(done + (int)i) * row_bytes, rows[i] + lead, row_bytes);
        done += (int)got;
    }
    if (started && cinfo.output_scanline == cinfo.output_height)
        jpeg_finish_decompress(&cinfo);
    else
        jpeg_abort_decompress(&cinfo);
    jpeg_destroy_decompress(&cinfo);
    free(line);
    return DECODED;
}

static PyObject *decode_region(PyObject *self, PyObject *args)
{
    Py_buffer src, dst;
    Job job;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*w*iiiiippp", &src, &dst, &job.y, &job.x, &job.height,
                          &job.width, &job.denom, &job.gray, &job.fast, &job.strict))
        return NULL;
    if (job.denom != 1 && job.denom != 2 && job.denom != 4 && job.denom != 8) {
        PyBuffer_Release(&src);
        PyBuffer_Release(&dst);
        PyErr_Format(PyExc_ValueError, "denom must be 1, 2, 4 or 8, got %d", job.denom);
        return NULL;
    }
    job.data = (const unsigned char *)src.buf;
    job.size = (size_t)src.len;
    job.out = (unsigned char *)dst.buf;
    job.out_size = (size_t)dst.len;
    job.message[0] = '\0';
    int code;
    Py_BEGIN_ALLOW_THREADS
    code = run(&job);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    switch (code) {
    case DECODED:
        Py_RETURN_NONE;
    case UNSUPPORTED:
        PyErr_SetString(PyExc_NotImplementedError, job.message);
        return NULL;
    case NO_MEMORY:
        return PyErr_NoMemory();
    default:
        PyErr_SetString(PyExc_ValueError, job.message);
        return NULL;
    }
}

static PyMethodDef methods[] = {
    {"decode_region", decode_region, METH_VARARGS,
     "decode_region(data, out, y, x, height, width, denom, gray, fast, strict)\n"
     "Decode one region of a JPEG image into `out` (see the module's C source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_libjpeg",
    "Region and DCT-scaled JPEG decoding with libjpeg-turbo's libjpeg API.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__libjpeg(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddIntConstant(m, "JPEG_LIB_VERSION", JPEG_LIB_VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
