/* The per-GPU-event sweeps of a rank's breakdown, in C (ncompass.analysis._sweep).
 *
 * Each function does what a loop of ncompass/analysis/{breakdown,launches,idle}.py does, over the
 * same array columns, with the same floating-point operations in the same order, so the results
 * are identical to the last bit (NaN times included: IEEE comparisons with NaN are false in C as
 * in Python). Without this extension (no C compiler) those loops run in Python.
 *
 * Columns come as array.array buffers: 'd' for times, 'i' for a trace's index columns (launch
 * and marker links), 'l' for the orders computed here, 'b' for kernel classes.
 * Per-event results are written into arrays the caller allocated at their exact length (a first
 * call counts them) or sorted in place: no growing buffer and no copy to bytes, so a sweep over
 * N events holds at most one column of N beside what it reads.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NO_LINK (-1L)

/* A read-only view of a one-dimensional array column with items of ``format``. */
static int open_column(PyObject *column, Py_buffer *view, char format) {
    if (PyObject_GetBuffer(column, view, PyBUF_FORMAT) < 0) return -1;
    if (view->ndim != 1 || view->format == NULL || view->format[0] != format ||
        view->format[1] != '\0') {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_TypeError, "expected an array of '%c' items", format);
        return -1;
    }
    return 0;
}

static int open_columns(PyObject **columns, const char *formats, Py_buffer *views, int count) {
    for (int opened = 0; opened < count; opened++) {
        if (open_column(columns[opened], &views[opened], formats[opened]) < 0) {
            while (opened-- > 0) PyBuffer_Release(&views[opened]);
            return -1;
        }
    }
    return 0;
}

/* A writable view of a one-dimensional array column of ``format``; of ``count`` items unless
 * ``count`` is -1. */
static int open_output(PyObject *column, Py_buffer *view, char format, Py_ssize_t itemsize,
                       Py_ssize_t count) {
    if (PyObject_GetBuffer(column, view, PyBUF_FORMAT | PyBUF_WRITABLE) < 0) return -1;
    if (view->ndim != 1 || view->format == NULL || view->format[0] != format ||
        view->format[1] != '\0' || view->itemsize != itemsize) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_TypeError, "expected an array of '%c' items", format);
        return -1;
    }
    if (count >= 0 && view->len != count * itemsize) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_ValueError, "expected an array of %zd items", count);
        return -1;
    }
    return 0;
}

static void close_columns(Py_buffer *views, int count) {
    for (int index = 0; index < count; index++) PyBuffer_Release(&views[index]);
}

/* An order of GPU events: an array of 'l' indices, or None for every event in index order (GPU
 * events already in start order need no index column). */
static int open_order(PyObject *column, Py_buffer *view, const long **order, Py_ssize_t *count,
                      Py_ssize_t events) {
    view->obj = NULL;
    if (column == Py_None) {
        *order = NULL;
        *count = events;
        return 0;
    }
    if (open_column(column, view, 'l') < 0) return -1;
    *order = view->buf;
    *count = view->len / (Py_ssize_t)sizeof(long);
    return 0;
}

static void close_order(Py_buffer *view) {
    if (view->obj != NULL) PyBuffer_Release(view);
}

#define AT(order, position) ((order) != NULL ? (order)[position] : (long)(position))

#define LENGTH(view, type) ((view).len / (Py_ssize_t)sizeof(type))

/* A growable column of doubles. */
typedef struct {
    double *items;
    Py_ssize_t count, capacity;
} Doubles;

static int doubles_add(Doubles *column, double value) {
    if (column->count == column->capacity) {
        Py_ssize_t capacity = column->capacity ? column->capacity * 2 : 1024;
        double *items = PyMem_Realloc(column->items, (size_t)capacity * sizeof(double));
        if (items == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        column->items = items;
        column->capacity = capacity;
    }
    column->items[column->count++] = value;
    return 0;
}

static PyObject *doubles_bytes(Doubles *column) {
    return PyBytes_FromStringAndSize((const char *)column->items,
                                     column->count * (Py_ssize_t)sizeof(double));
}

static int index_error(const char *what) {
    PyErr_Format(PyExc_IndexError, "%s index out of range", what);
    return -1;
}

/* ---- order_by_start -------------------------------------------------------------------- */

typedef struct {
    double start;
    long index;
    Py_ssize_t position; /* in ``selected``: ties keep it, as Python's stable sort does */
} Keyed;

static int by_start_then_position(const void *left, const void *right) {
    const Keyed *a = left, *b = right;
    if (a->start < b->start) return -1;
    if (a->start > b->start) return 1;
    return (a->position > b->position) - (a->position < b->position);
}

PyDoc_STRVAR(order_by_start_doc,
             "order_by_start(start, selected)\n--\n\n"
             "Sort ``selected`` (a writable array of 'l' indices) by ``start`` ('d') in place, ties "
             "in their order in ``selected``, and return it; None (``selected`` untouched) when a "
             "start is NaN (Python sorts those). Indices already in order cost no allocation.");

static PyObject *order_by_start(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *columns[2];
    if (!PyArg_ParseTuple(args, "OO", &columns[0], &columns[1])) return NULL;
    Py_buffer views[2];
    if (open_column(columns[0], &views[0], 'd') < 0) return NULL;
    if (open_output(columns[1], &views[1], 'l', (Py_ssize_t)sizeof(long), -1) < 0) {
        PyBuffer_Release(&views[0]);
        return NULL;
    }
    const double *start = views[0].buf;
    long *selected = views[1].buf;
    Py_ssize_t events = LENGTH(views[0], double), count = LENGTH(views[1], long);
    PyObject *result = NULL;
    Keyed *keyed = NULL;
    int in_order = 1;
    for (Py_ssize_t position = 0; position < count; position++) {
        long index = selected[position];
        if (index < 0 || index >= events) {
            index_error("a GPU event");
            goto done;
        }
        if (isnan(start[index])) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        if (position > 0 && start[index] < start[selected[position - 1]]) in_order = 0;
    }
    if (!in_order) {
        keyed = PyMem_Malloc((size_t)(count ? count : 1) * sizeof(Keyed));
        if (keyed == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t position = 0; position < count; position++)
            keyed[position] = (Keyed){start[selected[position]], selected[position], position};
        qsort(keyed, (size_t)count, sizeof(Keyed), by_start_then_position);
        for (Py_ssize_t position = 0; position < count; position++)
            selected[position] = keyed[position].index;
    }
    result = Py_NewRef(columns[1]);
done:
    PyMem_Free(keyed);
    close_columns(views, 2);
    return result;
}

PyDoc_STRVAR(in_start_order_doc,
             "in_start_order(start)\n--\n\n"
             "Whether every event is in order of ``start`` ('d') already, with no NaN: then the "
             "sweeps take None for their order instead of an index column.");

static PyObject *in_start_order(PyObject *Py_UNUSED(module), PyObject *column) {
    Py_buffer view;
    if (open_column(column, &view, 'd') < 0) return NULL;
    const double *start = view.buf;
    Py_ssize_t count = LENGTH(view, double);
    int in_order = 1;
    for (Py_ssize_t index = 0; index < count && in_order; index++)
        if (isnan(start[index]) || (index > 0 && start[index] < start[index - 1])) in_order = 0;
    PyBuffer_Release(&view);
    return PyBool_FromLong(in_order);
}

/* ---- merge_union ----------------------------------------------------------------------- */

PyDoc_STRVAR(merge_union_doc,
             "merge_union(start, duration, kernel_class, by_start, classes, code, starts, "
             "ends)\n--\n\n"
             "breakdown's union of the GPU intervals in ``by_start`` order (all of them when "
             "``code`` is -1, else those of that kernel class): returns (how many disjoint "
             "intervals, the sum of their lengths added in order as intervals.total_length does, "
             "the first start and the last end or 0.0), and writes the intervals into ``starts`` and "
             "``ends`` ('d' arrays of exactly that length) unless they are None.");

static PyObject *merge_union(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *columns[4], *outputs[2];
    int classes, code;
    if (!PyArg_ParseTuple(args, "OOOOiiOO", &columns[0], &columns[1], &columns[2], &columns[3],
                          &classes, &code, &outputs[0], &outputs[1]))
        return NULL;
    if (classes < 1 || classes > 64 || code < -1 || code >= classes) {
        PyErr_SetString(PyExc_ValueError, "classes must be 1 to 64, code -1 to classes - 1");
        return NULL;
    }
    int writing = outputs[0] != Py_None || outputs[1] != Py_None;
    Py_buffer views[4], out[2];
    if (open_columns(columns, "ddb", views, 3) < 0) return NULL;
    const double *start = views[0].buf, *duration = views[1].buf;
    const signed char *kernel_class = views[2].buf;
    const long *order;
    Py_ssize_t events = LENGTH(views[0], double), count;
    if (open_order(columns[3], &views[3], &order, &count, events) < 0) {
        close_columns(views, 3);
        return NULL;
    }
    PyObject *result = NULL;
    int opened = 0, open = 0;
    double *starts = NULL, *ends = NULL, open_start = 0.0, open_end = 0.0;
    double total = 0.0, first_start = 0.0;
    Py_ssize_t capacity = 0, merged = 0;
    if (LENGTH(views[1], double) < events || LENGTH(views[2], signed char) < events) {
        index_error("a GPU event");
        goto done;
    }
    if (writing) {
        if (open_output(outputs[0], &out[0], 'd', (Py_ssize_t)sizeof(double), -1) < 0) goto done;
        capacity = LENGTH(out[0], double);
        if (open_output(outputs[1], &out[1], 'd', (Py_ssize_t)sizeof(double), capacity) < 0) {
            PyBuffer_Release(&out[0]);
            goto done;
        }
        opened = 1;
        starts = out[0].buf;
        ends = out[1].buf;
    }
    for (Py_ssize_t position = 0; position < count; position++) {
        long index = AT(order, position);
        if (index < 0 || index >= events) {
            index_error("a GPU event");
            goto done;
        }
        if (kernel_class[index] < 0 || kernel_class[index] >= classes) {
            index_error("a kernel class");
            goto done;
        }
        if (code >= 0 && kernel_class[index] != code) continue;
        double begin = start[index], end = begin + duration[index];
        if (open && begin <= open_end) { /* the rule of breakdown.merged_union */
            if (end > open_end) open_end = end;
            continue;
        }
        if (open) {
            if (writing) {
                if (merged >= capacity) goto too_short;
                starts[merged] = open_start;
                ends[merged] = open_end;
            }
            total += open_end - open_start;
            merged++;
        } else {
            first_start = begin;
        }
        open = 1;
        open_start = begin;
        open_end = end;
    }
    if (open) {
        if (writing) {
            if (merged >= capacity) goto too_short;
            starts[merged] = open_start;
            ends[merged] = open_end;
        }
        total += open_end - open_start;
        merged++;
    }
    if (writing && merged != capacity) goto too_short;
    result = Py_BuildValue("nddd", merged, total, first_start, open ? open_end : 0.0);
    goto done;
too_short:
    PyErr_SetString(PyExc_ValueError, "starts and ends do not have the union's length");
done:
    if (opened) {
        PyBuffer_Release(&out[0]);
        PyBuffer_Release(&out[1]);
    }
    close_columns(views, 3);
    close_order(&views[3]);
    return result;
}

/* ---- union_coverage ------------------------------------------------------------------- */

PyDoc_STRVAR(union_coverage_doc,
             "union_coverage(start, duration, kernel_class, by_start, classes, code, begin, "
             "scale, columns)\n--\n\n"
             "timeline._coverage of merge_union's intervals, without them: the share of each of "
             "``columns`` bins covered, as a list of floats; None when a bin position is not "
             "finite (Python's int() decides what that means).");

/* Add one merged interval to the bins, as timeline._coverage does; 0 when not finite. */
static int cover(double *covered, Py_ssize_t columns, double begin, double scale, double start,
                 double stop) {
    double first = (start - begin) * scale, last = (stop - begin) * scale;
    if (!isfinite(first)) return 0;
    if (first >= (double)columns) return 1;
    Py_ssize_t column = first > 0.0 ? (Py_ssize_t)first : 0; /* max(0, int(first)) */
    for (; column < columns && (double)column < last; column++) {
        double upper = last < (double)(column + 1) ? last : (double)(column + 1);
        double lower = first > (double)column ? first : (double)column;
        covered[column] += upper - lower;
    }
    return 1;
}

static PyObject *union_coverage(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *columns_in[4];
    int classes, code;
    double begin, scale;
    Py_ssize_t columns;
    if (!PyArg_ParseTuple(args, "OOOOiiddn", &columns_in[0], &columns_in[1], &columns_in[2],
                          &columns_in[3], &classes, &code, &begin, &scale, &columns))
        return NULL;
    if (classes < 1 || classes > 64 || code < -1 || code >= classes || columns < 0 ||
        columns > 1000000) {
        PyErr_SetString(PyExc_ValueError,
                        "classes must be 1 to 64, code -1 to classes - 1, columns 0 to 1000000");
        return NULL;
    }
    Py_buffer views[4];
    if (open_columns(columns_in, "ddb", views, 3) < 0) return NULL;
    const double *start = views[0].buf, *duration = views[1].buf;
    const signed char *kernel_class = views[2].buf;
    const long *order;
    Py_ssize_t events = LENGTH(views[0], double), count;
    if (open_order(columns_in[3], &views[3], &order, &count, events) < 0) {
        close_columns(views, 3);
        return NULL;
    }
    PyObject *result = NULL;
    int open = 0;
    double open_start = 0.0, open_end = 0.0;
    double *covered = PyMem_Calloc((size_t)(columns ? columns : 1), sizeof(double));
    if (covered == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (LENGTH(views[1], double) < events || LENGTH(views[2], signed char) < events) {
        index_error("a GPU event");
        goto done;
    }
    for (Py_ssize_t position = 0; position < count; position++) {
        long index = AT(order, position);
        if (index < 0 || index >= events) {
            index_error("a GPU event");
            goto done;
        }
        if (kernel_class[index] < 0 || kernel_class[index] >= classes) {
            index_error("a kernel class");
            goto done;
        }
        if (code >= 0 && kernel_class[index] != code) continue;
        double first = start[index], end = first + duration[index];
        if (open && first <= open_end) {
            if (end > open_end) open_end = end;
            continue;
        }
        if (open && !cover(covered, columns, begin, scale, open_start, open_end)) goto not_finite;
        open = 1;
        open_start = first;
        open_end = end;
    }
    if (open && !cover(covered, columns, begin, scale, open_start, open_end)) goto not_finite;
    if ((result = PyList_New(columns)) == NULL) goto done;
    for (Py_ssize_t column = 0; column < columns; column++) {
        PyObject *share = PyFloat_FromDouble(covered[column]);
        if (share == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, column, share);
    }
    goto done;
not_finite:
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(covered);
    close_columns(views, 3);
    close_order(&views[3]);
    return result;
}

/* ---- launch_column --------------------------------------------------------------------- */

PyDoc_STRVAR(launch_column_doc,
             "launch_column(gpu_launch, gpu_start, gpu_duration, launch_start, launch_duration, "
             "selected, which, out)\n--\n\n"
             "launches.launch_statistics' loop over the linked events of ``selected``: returns "
             "(how many are linked, how many ran shorter than their launch), and writes their "
             "delays (``which`` 0), launch CPU durations (1) or GPU durations (2) into ``out`` "
             "(a 'd' array of exactly the linked count) unless it is None.");

static PyObject *launch_column(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *columns[6], *output;
    int which;
    if (!PyArg_ParseTuple(args, "OOOOOOiO", &columns[0], &columns[1], &columns[2], &columns[3],
                          &columns[4], &columns[5], &which, &output))
        return NULL;
    if (which < 0 || which > 2) {
        PyErr_SetString(PyExc_ValueError, "which must be 0, 1 or 2");
        return NULL;
    }
    Py_buffer views[6], out;
    if (open_columns(columns, "idddd", views, 5) < 0) return NULL;
    const int32_t *gpu_launch = views[0].buf;
    const long *selected;
    const double *gpu_start = views[1].buf, *gpu_duration = views[2].buf,
                 *launch_start = views[3].buf, *launch_duration = views[4].buf;
    Py_ssize_t events = LENGTH(views[0], int32_t), launches = LENGTH(views[3], double), count;
    if (open_order(columns[5], &views[5], &selected, &count, events) < 0) {
        close_columns(views, 5);
        return NULL;
    }
    Py_ssize_t linked = 0, shorter = 0, capacity = 0;
    double *values = NULL;
    int opened = 0;
    PyObject *result = NULL;
    if (LENGTH(views[1], double) < events || LENGTH(views[2], double) < events ||
        LENGTH(views[4], double) < launches) {
        index_error("a GPU event");
        goto done;
    }
    if (output != Py_None) {
        if (open_output(output, &out, 'd', (Py_ssize_t)sizeof(double), -1) < 0) goto done;
        opened = 1;
        values = out.buf;
        capacity = LENGTH(out, double);
    }
    for (Py_ssize_t position = 0; position < count; position++) {
        long index = AT(selected, position);
        if (index < 0 || index >= events) {
            index_error("a GPU event");
            goto done;
        }
        long launch = gpu_launch[index];
        if (launch == NO_LINK) continue;
        if (launch < 0 || launch >= launches) {
            index_error("a launch");
            goto done;
        }
        double gpu_us = gpu_duration[index], cpu_us = launch_duration[launch];
        if (values != NULL) {
            if (linked >= capacity) goto wrong_length;
            values[linked] = which == 0   ? gpu_start[index] - launch_start[launch]
                             : which == 1 ? cpu_us
                                          : gpu_us;
        }
        linked++;
        if (gpu_us < cpu_us) shorter++;
    }
    if (values != NULL && linked != capacity) goto wrong_length;
    result = Py_BuildValue("nn", linked, shorter);
    goto done;
wrong_length:
    PyErr_SetString(PyExc_ValueError, "out does not have the linked events' length");
done:
    if (opened) PyBuffer_Release(&out);
    close_columns(views, 5);
    close_order(&views[5]);
    return result;
}

/* ---- sort_doubles ---------------------------------------------------------------------- */

static int by_value(const void *left, const void *right) {
    double a = *(const double *)left, b = *(const double *)right;
    return (a > b) - (a < b);
}

PyDoc_STRVAR(sort_doubles_doc,
             "sort_doubles(values)\n--\n\n"
             "Sort a writable 'd' array in place and return True; False (untouched) when it "
             "holds a NaN or a negative zero, whose place only Python's stable sort decides.");

static PyObject *sort_doubles(PyObject *Py_UNUSED(module), PyObject *column) {
    Py_buffer view;
    if (open_output(column, &view, 'd', (Py_ssize_t)sizeof(double), -1) < 0) return NULL;
    double *values = view.buf;
    Py_ssize_t count = LENGTH(view, double);
    int sortable = 1;
    for (Py_ssize_t index = 0; index < count && sortable; index++)
        if (isnan(values[index]) || (values[index] == 0.0 && signbit(values[index])))
            sortable = 0;
    if (sortable) qsort(values, (size_t)count, sizeof(double), by_value);
    PyBuffer_Release(&view);
    return PyBool_FromLong(sortable);
}

/* ---- idle_gaps ------------------------------------------------------------------------- */

typedef struct {
    double duration;
    long index;
    double idle_since;
} Gap;

static int gap_above(const Gap *a, const Gap *b) { /* Python's tuple order, indices unique */
    if (a->duration != b->duration) return a->duration > b->duration;
    return a->index > b->index;
}

PyDoc_STRVAR(idle_gaps_doc,
             "idle_gaps(gpu_start, gpu_duration, gpu_launch, launch_start, launch_marker, "
             "by_start, group_of, kept)\n--\n\n"
             "idle.classify_idle_gaps' sweep: ((count, total) host-bound, not host-bound and "
             "unknown; the host-bound time per marker group id as bytes of doubles, ids from "
             "group_of(marker index), asked once per marker; the ``kept`` largest gaps as "
             "(duration, next event index, idle since), largest first).");

static PyObject *idle_gaps(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *columns[6], *group_of;
    int kept;
    if (!PyArg_ParseTuple(args, "OOOOOOOi", &columns[0], &columns[1], &columns[2], &columns[3],
                          &columns[4], &columns[5], &group_of, &kept))
        return NULL;
    if (kept < 0 || kept > 1000) {
        PyErr_SetString(PyExc_ValueError, "kept must be 0 to 1000");
        return NULL;
    }
    Py_buffer views[6];
    if (open_columns(columns, "ddidi", views, 5) < 0) return NULL;
    const double *gpu_start = views[0].buf, *gpu_duration = views[1].buf,
                 *launch_start = views[3].buf;
    const int32_t *gpu_launch = views[2].buf, *launch_marker = views[4].buf;
    const long *order;
    Py_ssize_t events = LENGTH(views[0], double), launches = LENGTH(views[3], double), count;
    if (open_order(columns[5], &views[5], &order, &count, events) < 0) {
        close_columns(views, 5);
        return NULL;
    }
    /* categories: 0 host-bound, 1 not host-bound, 2 unknown (no launch) */
    Py_ssize_t counts[3] = {0, 0, 0};
    double totals[3] = {0.0, 0.0, 0.0};
    Doubles by_group = {0};
    PyObject *group_ids = PyDict_New(); /* marker index -> group id, as group_of answered */
    Gap *largest = PyMem_Calloc((size_t)(kept ? kept : 1), sizeof(Gap));
    int held = 0;
    PyObject *result = NULL;
    if (group_ids == NULL || largest == NULL) {
        if (largest == NULL) PyErr_NoMemory();
        goto done;
    }
    if (LENGTH(views[1], double) < events || LENGTH(views[2], int32_t) < events ||
        LENGTH(views[4], int32_t) < launches) {
        index_error("a GPU event");
        goto done;
    }
    const double infinity = INFINITY;
    double busy_until = infinity;
    for (Py_ssize_t position = 0; position < count; position++) {
        long index = AT(order, position);
        if (index < 0 || index >= events) {
            index_error("a GPU event");
            goto done;
        }
        double start = gpu_start[index];
        if (start > busy_until) {
            double duration = start - busy_until;
            long launch = gpu_launch[index];
            int category = 2;
            if (launch != NO_LINK) {
                if (launch < 0 || launch >= launches) {
                    index_error("a launch");
                    goto done;
                }
                category = launch_start[launch] >= busy_until ? 0 : 1;
            }
            counts[category]++;
            totals[category] += duration;
            if (category == 0 && launch_marker[launch] != NO_LINK) {
                PyObject *marker = PyLong_FromLong(launch_marker[launch]);
                if (marker == NULL) goto done;
                PyObject *known = PyDict_GetItemWithError(group_ids, marker); /* borrowed */
                Py_ssize_t group;
                if (known != NULL) {
                    group = PyLong_AsSsize_t(known);
                } else if (PyErr_Occurred()) {
                    group = -1;
                } else {
                    PyObject *answer = PyObject_CallOneArg(group_of, marker);
                    group = answer ? PyLong_AsSsize_t(answer) : -1;
                    if (answer != NULL && !PyErr_Occurred() &&
                        PyDict_SetItem(group_ids, marker, answer) < 0)
                        group = -1;
                    Py_XDECREF(answer);
                }
                Py_DECREF(marker);
                if (group < 0) {
                    if (!PyErr_Occurred())
                        PyErr_SetString(PyExc_ValueError, "group_of gave a negative id");
                    goto done;
                }
                while (by_group.count <= group)
                    if (doubles_add(&by_group, 0.0) < 0) goto done;
                by_group.items[group] += duration;
            }
            Gap gap = {duration, index, busy_until};
            if (held < kept) {
                largest[held++] = gap;
            } else if (kept > 0) { /* replace the smallest held if this one is above it */
                int smallest = 0;
                for (int slot = 1; slot < held; slot++)
                    if (gap_above(&largest[smallest], &largest[slot])) smallest = slot;
                if (gap_above(&gap, &largest[smallest])) largest[smallest] = gap;
            }
        }
        double end = start + gpu_duration[index];
        if (end > busy_until || busy_until == infinity) busy_until = end;
    }
    /* largest first */
    for (int sorted = 0; sorted < held; sorted++)
        for (int slot = sorted + 1; slot < held; slot++)
            if (gap_above(&largest[slot], &largest[sorted])) {
                Gap swap = largest[sorted];
                largest[sorted] = largest[slot];
                largest[slot] = swap;
            }
    PyObject *gaps = PyList_New(held);
    if (gaps == NULL) goto done;
    for (int slot = 0; slot < held; slot++) {
        PyObject *item = Py_BuildValue("(dld)", largest[slot].duration, largest[slot].index,
                                       largest[slot].idle_since);
        if (item == NULL) {
            Py_DECREF(gaps);
            goto done;
        }
        PyList_SET_ITEM(gaps, slot, item);
    }
    PyObject *group_totals = doubles_bytes(&by_group);
    if (group_totals != NULL)
        result = Py_BuildValue("((nd)(nd)(nd)NN)", counts[0], totals[0], counts[1], totals[1],
                               counts[2], totals[2], group_totals, gaps);
    else
        Py_DECREF(gaps);
done:
    Py_XDECREF(group_ids);
    PyMem_Free(largest);
    PyMem_Free(by_group.items);
    close_columns(views, 5);
    close_order(&views[5]);
    return result;
}

static PyMethodDef module_functions[] = {
    {"order_by_start", order_by_start, METH_VARARGS, order_by_start_doc},
    {"in_start_order", in_start_order, METH_O, in_start_order_doc},
    {"merge_union", merge_union, METH_VARARGS, merge_union_doc},
    {"union_coverage", union_coverage, METH_VARARGS, union_coverage_doc},
    {"launch_column", launch_column, METH_VARARGS, launch_column_doc},
    {"sort_doubles", sort_doubles, METH_O, sort_doubles_doc},
    {"idle_gaps", idle_gaps, METH_VARARGS, idle_gaps_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef sweep_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_sweep",
    .m_doc = "The per-GPU-event sweeps of a rank's breakdown, in C.",
    .m_size = -1,
    .m_methods = module_functions,
};

PyMODINIT_FUNC PyInit__sweep(void) { return PyModule_Create(&sweep_module); }
