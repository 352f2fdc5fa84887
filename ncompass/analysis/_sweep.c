/* The per-GPU-event sweeps of a rank's breakdown, in C (ncompass.analysis._sweep).
 *
 * Each function does what a loop of ncompass/analysis/{breakdown,launches,idle}.py does, over the
 * same array columns, with the same floating-point operations in the same order, so the results
 * are identical to the last bit (NaN times included: IEEE comparisons with NaN are false in C as
 * in Python). Without this extension (no C compiler) those loops run in Python.
 *
 * Columns come as array.array buffers: 'd' for times, 'l' for indices, 'b' for kernel classes.
 * Results go back as bytes of doubles (or longs), which the caller turns into arrays.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
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

static void close_columns(Py_buffer *views, int count) {
    for (int index = 0; index < count; index++) PyBuffer_Release(&views[index]);
}

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
             "The indices of ``selected`` ('l') sorted by ``start`` ('d') as bytes of longs, ties "
             "in their order in ``selected``; None when a start is NaN (Python sorts those).");

static PyObject *order_by_start(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *columns[2];
    if (!PyArg_ParseTuple(args, "OO", &columns[0], &columns[1])) return NULL;
    Py_buffer views[2];
    if (open_columns(columns, "dl", views, 2) < 0) return NULL;
    const double *start = views[0].buf;
    const long *selected = views[1].buf;
    Py_ssize_t events = LENGTH(views[0], double), count = LENGTH(views[1], long);
    PyObject *result = NULL;
    Keyed *keyed = PyMem_Malloc((size_t)(count ? count : 1) * sizeof(Keyed));
    if (keyed == NULL) {
        PyErr_NoMemory();
        goto done;
    }
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
        keyed[position] = (Keyed){start[index], index, position};
    }
    qsort(keyed, (size_t)count, sizeof(Keyed), by_start_then_position);
    result = PyBytes_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(long));
    if (result == NULL) goto done;
    long *out = (long *)PyBytes_AS_STRING(result);
    for (Py_ssize_t position = 0; position < count; position++) out[position] = keyed[position].index;
done:
    PyMem_Free(keyed);
    close_columns(views, 2);
    return result;
}

/* ---- merge_by_class -------------------------------------------------------------------- */

typedef struct {
    int open;
    double start, end;
    Doubles starts, ends;
} Union;

/* Extend the open interval or close it and open a new one (breakdown._merged_by_class). */
static int union_add(Union *merged, double start, double end) {
    if (merged->open && start <= merged->end) {
        if (end > merged->end) merged->end = end;
        return 0;
    }
    if (merged->open &&
        (doubles_add(&merged->starts, merged->start) < 0 ||
         doubles_add(&merged->ends, merged->end) < 0))
        return -1;
    merged->open = 1;
    merged->start = start;
    merged->end = end;
    return 0;
}

static PyObject *union_columns(Union *merged) {
    if (merged->open && (doubles_add(&merged->starts, merged->start) < 0 ||
                         doubles_add(&merged->ends, merged->end) < 0))
        return NULL;
    PyObject *starts = doubles_bytes(&merged->starts);
    PyObject *ends = starts ? doubles_bytes(&merged->ends) : NULL;
    PyObject *pair = ends ? PyTuple_Pack(2, starts, ends) : NULL;
    Py_XDECREF(starts);
    Py_XDECREF(ends);
    return pair;
}

PyDoc_STRVAR(merge_by_class_doc,
             "merge_by_class(start, duration, kernel_class, by_start, classes)\n--\n\n"
             "breakdown._merged_by_class: the union of the GPU intervals and of each kernel "
             "class's, as ((starts, ends), [(starts, ends) per class]) in bytes of doubles.");

static PyObject *merge_by_class(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *columns[4];
    int classes;
    if (!PyArg_ParseTuple(args, "OOOOi", &columns[0], &columns[1], &columns[2], &columns[3],
                          &classes))
        return NULL;
    if (classes < 1 || classes > 64) {
        PyErr_SetString(PyExc_ValueError, "classes must be 1 to 64");
        return NULL;
    }
    Py_buffer views[4];
    if (open_columns(columns, "ddbl", views, 4) < 0) return NULL;
    const double *start = views[0].buf, *duration = views[1].buf;
    const signed char *kernel_class = views[2].buf;
    const long *order = views[3].buf;
    Py_ssize_t events = LENGTH(views[0], double), count = LENGTH(views[3], long);
    PyObject *result = NULL, *per_class = NULL, *busy_pair = NULL;
    Union busy = {0}, *by_class = PyMem_Calloc((size_t)classes, sizeof(Union));
    if (by_class == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (LENGTH(views[1], double) < events || LENGTH(views[2], signed char) < events) {
        index_error("a GPU event");
        goto done;
    }
    for (Py_ssize_t position = 0; position < count; position++) {
        long index = order[position];
        if (index < 0 || index >= events) {
            index_error("a GPU event");
            goto done;
        }
        double begin = start[index], end = begin + duration[index];
        int code = kernel_class[index];
        if (code < 0 || code >= classes) {
            index_error("a kernel class");
            goto done;
        }
        if (union_add(&busy, begin, end) < 0 || union_add(&by_class[code], begin, end) < 0)
            goto done;
    }
    if ((busy_pair = union_columns(&busy)) == NULL) goto done;
    if ((per_class = PyList_New(classes)) == NULL) goto done;
    for (int code = 0; code < classes; code++) {
        PyObject *pair = union_columns(&by_class[code]);
        if (pair == NULL) goto done;
        PyList_SET_ITEM(per_class, code, pair);
    }
    result = PyTuple_Pack(2, busy_pair, per_class);
done:
    Py_XDECREF(busy_pair);
    Py_XDECREF(per_class);
    PyMem_Free(busy.starts.items);
    PyMem_Free(busy.ends.items);
    if (by_class != NULL) {
        for (int code = 0; code < classes; code++) {
            PyMem_Free(by_class[code].starts.items);
            PyMem_Free(by_class[code].ends.items);
        }
        PyMem_Free(by_class);
    }
    close_columns(views, 4);
    return result;
}

/* ---- launch_columns -------------------------------------------------------------------- */

PyDoc_STRVAR(launch_columns_doc,
             "launch_columns(gpu_launch, gpu_start, gpu_duration, launch_start, launch_duration, "
             "selected)\n--\n\n"
             "launches.launch_statistics' loop: (delays, launch CPU durations, GPU durations) of "
             "the linked events of ``selected`` as bytes of doubles, and how many GPU events "
             "were shorter than their launch.");

static PyObject *launch_columns(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *columns[6];
    if (!PyArg_ParseTuple(args, "OOOOOO", &columns[0], &columns[1], &columns[2], &columns[3],
                          &columns[4], &columns[5]))
        return NULL;
    Py_buffer views[6];
    if (open_columns(columns, "ldddd" "l", views, 6) < 0) return NULL;
    const long *gpu_launch = views[0].buf, *selected = views[5].buf;
    const double *gpu_start = views[1].buf, *gpu_duration = views[2].buf,
                 *launch_start = views[3].buf, *launch_duration = views[4].buf;
    Py_ssize_t events = LENGTH(views[0], long), launches = LENGTH(views[3], double),
               count = LENGTH(views[5], long);
    Doubles delays = {0}, cpu = {0}, gpu = {0};
    Py_ssize_t shorter = 0;
    PyObject *result = NULL;
    if (LENGTH(views[1], double) < events || LENGTH(views[2], double) < events ||
        LENGTH(views[4], double) < launches) {
        index_error("a GPU event");
        goto done;
    }
    for (Py_ssize_t position = 0; position < count; position++) {
        long index = selected[position];
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
        if (doubles_add(&delays, gpu_start[index] - launch_start[launch]) < 0 ||
            doubles_add(&cpu, cpu_us) < 0 || doubles_add(&gpu, gpu_us) < 0)
            goto done;
        if (gpu_us < cpu_us) shorter++;
    }
    PyObject *parts[3] = {doubles_bytes(&delays), NULL, NULL};
    if (parts[0] != NULL) parts[1] = doubles_bytes(&cpu);
    if (parts[1] != NULL) parts[2] = doubles_bytes(&gpu);
    if (parts[2] != NULL) result = Py_BuildValue("OOOn", parts[0], parts[1], parts[2], shorter);
    for (int part = 0; part < 3; part++) Py_XDECREF(parts[part]);
done:
    PyMem_Free(delays.items);
    PyMem_Free(cpu.items);
    PyMem_Free(gpu.items);
    close_columns(views, 6);
    return result;
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
    if (open_columns(columns, "ddldll", views, 6) < 0) return NULL;
    const double *gpu_start = views[0].buf, *gpu_duration = views[1].buf,
                 *launch_start = views[3].buf;
    const long *gpu_launch = views[2].buf, *launch_marker = views[4].buf, *order = views[5].buf;
    Py_ssize_t events = LENGTH(views[0], double), launches = LENGTH(views[3], double),
               count = LENGTH(views[5], long);
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
    if (LENGTH(views[1], double) < events || LENGTH(views[2], long) < events ||
        LENGTH(views[4], long) < launches) {
        index_error("a GPU event");
        goto done;
    }
    const double infinity = INFINITY;
    double busy_until = infinity;
    for (Py_ssize_t position = 0; position < count; position++) {
        long index = order[position];
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
    close_columns(views, 6);
    return result;
}

static PyMethodDef module_functions[] = {
    {"order_by_start", order_by_start, METH_VARARGS, order_by_start_doc},
    {"merge_by_class", merge_by_class, METH_VARARGS, merge_by_class_doc},
    {"launch_columns", launch_columns, METH_VARARGS, launch_columns_doc},
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
