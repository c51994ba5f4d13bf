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
 * and NotImplementedError for a colour space libjpeg cannot turn into RGB or grey (CMYK/YCCK).
 * The GIL is released while decoding.
 *
 * Restart markers: a sequential Huffman JPEG with one interleaved scan whose restart
 * interval divides the MCUs of a row (what add_restart_markers writes) is random access
 * at the granularity of one interval. decode_region then splices a smaller JPEG out of
 * it first: the same header with a smaller frame size, and only the intervals that cover
 * the region plus one MCU of margin on every side, renumbered. Rows above the region
 * and columns beside it are then not even entropy-decoded. Each interval restarts the DC
 * predictions, so the spliced file decodes to exactly the pixels of those MCUs, and the
 * margin keeps the chroma upsampling at the cut edges out of the region. Any file that
 * does not have this layout, or whose markers are not where the layout says (damage),
 * is decoded as it is.
 *
 * add_restart_markers(data, interval_pixels) -> bytes
 *   The same image, losslessly rewritten (the DCT coefficients are copied, not
 *   re-quantised) as a baseline JPEG with optimised Huffman tables and a restart marker
 *   every k MCUs, k the largest divisor of the MCUs per row that spans at most
 *   interval_pixels pixels (at least 1). APPn and COM markers are kept. Decoding it gives
 *   the same pixels as decoding `data`.
 *
 * restart_layout(data) -> (interval, mcus_per_row, mcu_rows, mcu_height, mcu_width) or None
 *   The layout decode_region splices, or None when `data` does not have it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

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

/* ---- restart-marker layout and splicing ------------------------------------------- */

typedef struct {
    size_t sof;        /* offset of the frame header's sample precision byte */
    size_t entropy;    /* offset of the first byte of entropy-coded data */
    int height, width; /* frame size */
    int interval;      /* restart interval in MCUs */
    int mcu_h, mcu_w;  /* MCU size in pixels at scale 1 */
    int per_row, rows; /* MCUs per row, MCU rows */
} Layout;

static int splicing = 1; /* _set_splicing(False) turns splicing off (tests) */

/* Output pixels kept between the region and any cut edge (a splice's, a crop's): fancy
 * chroma upsampling reads one chroma sample beyond a pixel, at most 2 output pixels for
 * 2x subsampling; libjpeg replicates the edge sample there instead. */
#define EDGE_MARGIN 4

static unsigned be16(const unsigned char *p) { return ((unsigned)p[0] << 8) | p[1]; }

/* Fill `lay` and return 1 when `data` is a sequential Huffman JPEG (SOF0/SOF1, 8-bit)
 * with exactly one scan holding every component and a restart interval that divides
 * the MCUs per row; else 0. Reads the markers only, never the entropy-coded data. */
static int read_layout(const unsigned char *data, size_t size, Layout *lay)
{
    size_t pos = 2;
    int have_sof = 0, components = 0, hmax = 1, vmax = 1;
    memset(lay, 0, sizeof(*lay));
    if (size < 4 || data[0] != 0xFF || data[1] != 0xD8)
        return 0;
    for (;;) {
        if (pos + 4 > size || data[pos] != 0xFF)
            return 0;
        while (pos < size && data[pos] == 0xFF)
            pos++;
        if (pos + 3 > size)
            return 0;
        const unsigned marker = data[pos++];
        if (marker == 0xD8 || marker == 0xD9 || (marker >= 0xD0 && marker <= 0xD7) || marker == 0x01)
            return 0;
        const size_t len = be16(data + pos);
        if (len < 2 || pos + len > size)
            return 0;
        const unsigned char *seg = data + pos + 2;
        if (marker == 0xC0 || marker == 0xC1) {
            if (have_sof || len < 8 || seg[0] != 8)
                return 0;
            lay->sof = pos + 2;
            lay->height = (int)be16(seg + 1);
            lay->width = (int)be16(seg + 3);
            components = seg[5];
            if (components < 1 || components > 4 || len != 8 + 3 * (size_t)components)
                return 0;
            for (int c = 0; c < components; c++) {
                const int h = seg[6 + 3 * c + 1] >> 4, v = seg[6 + 3 * c + 1] & 15;
                if (h < 1 || h > 4 || v < 1 || v > 4)
                    return 0;
                hmax = h > hmax ? h : hmax;
                vmax = v > vmax ? v : vmax;
            }
            have_sof = 1;
        } else if (marker >= 0xC2 && marker <= 0xCF && marker != 0xC4 && marker != 0xCC) {
            return 0; /* progressive, lossless, arithmetic or hierarchical */
        } else if (marker == 0xDD) {
            if (len != 4)
                return 0;
            lay->interval = (int)be16(seg);
        } else if (marker == 0xDA) {
            if (!have_sof || len < 6 || seg[0] != components)
                return 0;
            lay->entropy = pos + len;
            break;
        }
        pos += len;
    }
    if (lay->interval <= 0 || lay->height <= 0 || lay->width <= 0)
        return 0;
    if (components == 1) { /* a single-component scan: one block per MCU */
        lay->mcu_h = lay->mcu_w = 8;
    } else {
        lay->mcu_h = 8 * vmax;
        lay->mcu_w = 8 * hmax;
    }
    lay->per_row = (lay->width + lay->mcu_w - 1) / lay->mcu_w;
    lay->rows = (lay->height + lay->mcu_h - 1) / lay->mcu_h;
    return lay->per_row % lay->interval == 0;
}

/* Find where each restart interval's data starts and ends. Returns 1 when there are
 * exactly `count` intervals, separated by RST0..RST7 in sequence and ended by a marker
 * other than RSTn (EOI); else 0 (damaged: decode the file as it is). */
static int index_intervals(const unsigned char *data, size_t size, size_t entropy, size_t count,
                           size_t *starts, size_t *ends)
{
    size_t found = 0, p = entropy;
    starts[0] = entropy;
    while (p + 1 < size) {
        const unsigned char *q = memchr(data + p, 0xFF, size - 1 - p);
        if (q == NULL)
            return 0;
        const size_t at = (size_t)(q - data);
        const unsigned next = data[at + 1];
        if (next == 0x00) {
            p = at + 2;
        } else if (next == 0xFF) {
            p = at + 1;
        } else if (next >= 0xD0 && next <= 0xD7) {
            if (next != 0xD0 + (found & 7) || found + 1 >= count)
                return 0;
            ends[found++] = at;
            starts[found] = at + 2;
            p = at + 2;
        } else {
            ends[found++] = at;
            return found == count;
        }
    }
    return 0;
}

/* When `job`'s file has the restart layout and the region leaves whole intervals out,
 * build the smaller JPEG that holds only the intervals the region needs (see the top of
 * this file) in *spliced (malloc'ed, the caller frees it), move job->data/size to it and
 * the region into its coordinates, and return 1. Else return 0 and change nothing. */
static int splice(Job *job, unsigned char **spliced)
{
    Layout lay;
    *spliced = NULL;
    if (!splicing || !read_layout(job->data, job->size, &lay))
        return 0;
    const int s = job->denom;
    const int mh = lay.mcu_h / s, mw = lay.mcu_w / s;
    const int out_h = (lay.height + s - 1) / s, out_w = (lay.width + s - 1) / s;
    if (mh < 1 || mw < 1 || job->y < 0 || job->x < 0 || job->height <= 0 || job->width <= 0 ||
        job->y > out_h - job->height || job->x > out_w - job->width)
        return 0; /* the plain path reports the bad region */
    const int k = lay.interval;
    const int top = job->y - EDGE_MARGIN, left = job->x - EDGE_MARGIN;
    const int bottom = job->y + job->height + EDGE_MARGIN, right = job->x + job->width + EDGE_MARGIN;
    const int r0 = top <= 0 ? 0 : top / mh;
    int r1 = (bottom + mh - 1) / mh, c1 = (right + mw - 1) / mw;
    const int c0 = left <= 0 ? 0 : left / mw / k * k;
    r1 = r1 > lay.rows ? lay.rows : r1;
    c1 = (c1 + k - 1) / k * k;
    c1 = c1 > lay.per_row ? lay.per_row : c1;
    if (r0 == 0 && r1 == lay.rows && c0 == 0 && c1 == lay.per_row)
        return 0; /* nothing to leave out */
    const size_t per_row = (size_t)(lay.per_row / k), count = per_row * (size_t)lay.rows;
    if (count > (job->size - lay.entropy) / 2 + 1)
        return 0; /* too few bytes for that many markers: damaged (or a bomb) */
    size_t *starts = malloc(2 * count * sizeof(size_t));
    if (starts == NULL)
        return 0;
    size_t *ends = starts + count;
    if (!index_intervals(job->data, job->size, lay.entropy, count, starts, ends)) {
        free(starts);
        return 0;
    }
    const size_t first = (size_t)(c0 / k), last = (size_t)(c1 / k);
    size_t need = lay.entropy + 2;
    for (int r = r0; r < r1; r++)
        for (size_t j = first; j < last; j++)
            need += ends[(size_t)r * per_row + j] - starts[(size_t)r * per_row + j] + 2;
    unsigned char *out = malloc(need);
    if (out == NULL) {
        free(starts);
        return 0;
    }
    memcpy(out, job->data, lay.entropy);
    const int new_h = r1 == lay.rows ? lay.height - r0 * lay.mcu_h : (r1 - r0) * lay.mcu_h;
    const int new_w = c1 == lay.per_row ? lay.width - c0 * lay.mcu_w : (c1 - c0) * lay.mcu_w;
    out[lay.sof + 1] = (unsigned char)(new_h >> 8);
    out[lay.sof + 2] = (unsigned char)(new_h & 255);
    out[lay.sof + 3] = (unsigned char)(new_w >> 8);
    out[lay.sof + 4] = (unsigned char)(new_w & 255);
    size_t at = lay.entropy, seq = 0;
    const size_t total = (size_t)(r1 - r0) * (last - first);
    for (int r = r0; r < r1; r++)
        for (size_t j = first; j < last; j++) {
            const size_t i = (size_t)r * per_row + j;
            memcpy(out + at, job->data + starts[i], ends[i] - starts[i]);
            at += ends[i] - starts[i];
            if (++seq < total) {
                out[at++] = 0xFF;
                out[at++] = (unsigned char)(0xD0 + ((seq - 1) & 7));
            }
        }
    out[at++] = 0xFF;
    out[at++] = 0xD9;
    free(starts);
    *spliced = out;
    job->data = out;
    job->size = at;
    job->y -= r0 * mh;
    job->x -= c0 * mw;
    return 1;
}

/* Runs without the GIL. Returns one of the codes above; job->message says why. */
static int decode_job(Job *job)
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
    if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
        snprintf(job->message, MESSAGE_SIZE, "CMYK/YCCK JPEG: no RGB or grey conversion in libjpeg");
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

    /* Crop to the region widened by EDGE_MARGIN pixels on each side (libjpeg widens it
     * further to iMCU boundaries): fancy chroma upsampling treats the crop's edges as the
     * image's, and the margin keeps that effect out of the region, so its pixels equal a
     * full decode's. */
    const int margin = EDGE_MARGIN;
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

/* Runs without the GIL: decode the spliced file when the layout allows, else (or when
 * that fails: report what the file itself says) the file as it is. */
static int run(Job *job)
{
    Job cut = *job;
    unsigned char *spliced;
    if (splice(&cut, &spliced)) {
        const int code = decode_job(&cut);
        free(spliced);
        if (code == DECODED)
            return DECODED;
    }
    return decode_job(job);
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

/* ---- lossless rewrite with restart markers ------------------------------------------ */

/* A destination that grows with realloc and stays owned by us, also after an error
 * (jpeg_mem_dest's buffer may have been replaced by then). */
typedef struct {
    struct jpeg_destination_mgr pub;
    unsigned char *buf;
    size_t capacity;
} GrowingDest;

static void dest_init(j_compress_ptr cinfo)
{
    GrowingDest *dest = (GrowingDest *)cinfo->dest;
    dest->pub.next_output_byte = dest->buf;
    dest->pub.free_in_buffer = dest->capacity;
}

static boolean dest_grow(j_compress_ptr cinfo)
{
    GrowingDest *dest = (GrowingDest *)cinfo->dest;
    unsigned char *grown = realloc(dest->buf, dest->capacity * 2);
    if (grown == NULL)
        ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 0);
    dest->pub.next_output_byte = grown + dest->capacity; /* the buffer was full */
    dest->pub.free_in_buffer = dest->capacity;
    dest->buf = grown;
    dest->capacity *= 2;
    return TRUE;
}

static void dest_term(j_compress_ptr cinfo) { (void)cinfo; }

typedef struct {
    const unsigned char *data;
    size_t size;
    int interval_pixels;
    GrowingDest dest;
    size_t out_size;
    char message[MESSAGE_SIZE];
} Transcode;

/* Runs without the GIL. Returns DECODED (t->dest.buf holds t->out_size bytes, the
 * caller frees it), BAD_DATA or NO_MEMORY (message set). */
static int transcode(Transcode *t)
{
    struct jpeg_decompress_struct src;
    struct jpeg_compress_struct dst;
    ErrorManager err;
    volatile int have_dst = 0;

    src.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = error_exit;
    err.pub.emit_message = emit_message;
    err.strict = 1;
    err.message[0] = '\0';
    t->out_size = 0;
    t->dest.capacity = t->size + 4096;
    t->dest.buf = malloc(t->dest.capacity);
    if (t->dest.buf == NULL) {
        snprintf(t->message, MESSAGE_SIZE, "out of memory");
        return NO_MEMORY;
    }
    t->dest.pub.init_destination = dest_init;
    t->dest.pub.empty_output_buffer = dest_grow;
    t->dest.pub.term_destination = dest_term;
    if (setjmp(err.jump)) {
        snprintf(t->message, MESSAGE_SIZE, "%s", err.message);
        if (have_dst)
            jpeg_destroy_compress(&dst);
        jpeg_destroy_decompress(&src);
        free(t->dest.buf);
        t->dest.buf = NULL;
        return BAD_DATA;
    }
    jpeg_create_decompress(&src);
    jpeg_mem_src(&src, t->data, (unsigned long)t->size);
    jpeg_save_markers(&src, JPEG_COM, 0xFFFF);
    for (int m = 0; m < 16; m++)
        jpeg_save_markers(&src, JPEG_APP0 + m, 0xFFFF);
    jpeg_read_header(&src, TRUE);
    jvirt_barray_ptr *coefficients = jpeg_read_coefficients(&src);

    dst.err = src.err;
    jpeg_create_compress(&dst);
    have_dst = 1;
    dst.dest = &t->dest.pub;
    jpeg_copy_critical_parameters(&src, &dst);
    dst.optimize_coding = TRUE;
    int hmax = 1;
    for (int c = 0; c < src.num_components; c++)
        hmax = src.comp_info[c].h_samp_factor > hmax ? src.comp_info[c].h_samp_factor : hmax;
    const int mcu_w = src.num_components == 1 ? 8 : 8 * hmax;
    const int per_row = ((int)src.image_width + mcu_w - 1) / mcu_w;
    int k = t->interval_pixels / mcu_w;
    k = k < 1 ? 1 : k > per_row ? per_row : k;
    while (per_row % k != 0)
        k--;
    dst.restart_interval = (unsigned int)k;
    jpeg_write_coefficients(&dst, coefficients);
    for (jpeg_saved_marker_ptr m = src.marker_list; m != NULL; m = m->next) {
        /* libjpeg writes its own JFIF (APP0) and Adobe (APP14) markers */
        if (dst.write_JFIF_header && m->marker == JPEG_APP0 && m->data_length >= 5 &&
            memcmp(m->data, "JFIF", 5) == 0)
            continue;
        if (dst.write_Adobe_marker && m->marker == JPEG_APP0 + 14 && m->data_length >= 5 &&
            memcmp(m->data, "Adobe", 5) == 0)
            continue;
        jpeg_write_marker(&dst, m->marker, m->data, m->data_length);
    }
    jpeg_finish_compress(&dst);
    t->out_size = t->dest.capacity - t->dest.pub.free_in_buffer;
    jpeg_destroy_compress(&dst);
    jpeg_finish_decompress(&src);
    jpeg_destroy_decompress(&src);
    return DECODED;
}

static PyObject *add_restart_markers(PyObject *self, PyObject *args)
{
    Py_buffer src;
    Transcode t;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*i", &src, &t.interval_pixels))
        return NULL;
    if (t.interval_pixels < 1) {
        PyBuffer_Release(&src);
        PyErr_Format(PyExc_ValueError, "interval_pixels must be at least 1, got %d",
                     t.interval_pixels);
        return NULL;
    }
    t.data = (const unsigned char *)src.buf;
    t.size = (size_t)src.len;
    t.message[0] = '\0';
    int code;
    Py_BEGIN_ALLOW_THREADS
    code = transcode(&t);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&src);
    if (code == NO_MEMORY)
        return PyErr_NoMemory();
    if (code != DECODED) {
        PyErr_SetString(PyExc_ValueError, t.message);
        return NULL;
    }
    PyObject *result = PyBytes_FromStringAndSize((const char *)t.dest.buf, (Py_ssize_t)t.out_size);
    free(t.dest.buf);
    return result;
}

static PyObject *restart_layout(PyObject *self, PyObject *args)
{
    Py_buffer src;
    Layout lay;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*", &src))
        return NULL;
    const int ok = read_layout((const unsigned char *)src.buf, (size_t)src.len, &lay);
    PyBuffer_Release(&src);
    if (!ok)
        Py_RETURN_NONE;
    return Py_BuildValue("(iiiii)", lay.interval, lay.per_row, lay.rows, lay.mcu_h, lay.mcu_w);
}

static PyObject *set_splicing(PyObject *self, PyObject *arg)
{
    (void)self;
    const int on = PyObject_IsTrue(arg);
    if (on < 0)
        return NULL;
    const int before = splicing;
    splicing = on;
    return PyBool_FromLong(before);
}

static PyMethodDef methods[] = {
    {"decode_region", decode_region, METH_VARARGS,
     "decode_region(data, out, y, x, height, width, denom, gray, fast, strict)\n"
     "Decode one region of a JPEG image into `out` (see the module's C source)."},
    {"add_restart_markers", add_restart_markers, METH_VARARGS,
     "add_restart_markers(data, interval_pixels) -> bytes\n"
     "The same JPEG losslessly rewritten with restart markers (see the module's C source)."},
    {"restart_layout", restart_layout, METH_VARARGS,
     "restart_layout(data) -> (interval, mcus_per_row, mcu_rows, mcu_height, mcu_width) or None"},
    {"_set_splicing", set_splicing, METH_O,
     "_set_splicing(on) -> previous: splice restart intervals in decode_region (tests)."},
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
