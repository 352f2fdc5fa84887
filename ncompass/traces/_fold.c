/* The per-event fold of trace linking (ncompass/traces/link.py, _Collector.add), in C.
 *
 * A Folder is made once per _Collector and handed each batch of LinkEvent structs. It folds the
 * common events itself: complete (X) operator calls, runtime/driver calls and GPU events whose
 * fields have the plain types profilers write, and every event that is only counted. Anything
 * else (markers, begin/end pairs, metadata, dicts, odd types) goes, in file order, to the
 * collector's Python fold, which stays the reference. Before each such hand-over the Folder
 * writes everything it holds back into the collector (columns, operator totals, counts, time
 * span) and reads it again afterwards, so both folds see one state and the result is exactly
 * the Python fold's, float for float.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <stdint.h>
#include <string.h>

/* Integers beyond 2**53 do not convert to double exactly: Python compares them exactly, so
 * events holding them are left to the Python fold. */
#define EXACT_INTEGER_LIMIT 9007199254740992LL
#define NO_LINK (-1)

enum { F_PH, F_CAT, F_NAME, F_PID, F_TID, F_TS, F_DUR, F_ARGS, EVENT_FIELDS };
static const char *const EVENT_FIELD_NAMES[EVENT_FIELDS] = {"ph",  "cat", "name", "pid",
                                                            "tid", "ts",  "dur",  "args"};
enum { A_CORRELATION, A_BYTES, ARGS_FIELDS };
static const char *const ARGS_FIELD_NAMES[ARGS_FIELDS] = {"correlation", "bytes"};

enum { L_NAME, L_THREAD, L_START, L_DURATION, L_CORRELATION, LAUNCH_COLUMNS };
enum { G_NAME, G_CLASS, G_STREAM, G_START, G_DURATION, G_CORRELATION, G_BYTES, GPU_COLUMNS };

enum { KIND_OTHER, KIND_CPU_OP, KIND_RUNTIME, KIND_GPU, KIND_GPU_SIDE };

/* A growable byte buffer, appended to array.array columns with frombytes() when flushed. */
typedef struct {
    char *data;
    Py_ssize_t size;
    Py_ssize_t capacity;
} Buffer;

static int buffer_put(Buffer *buffer, const void *value, Py_ssize_t size) {
    if (buffer->size + size > buffer->capacity) {
        Py_ssize_t capacity = buffer->capacity ? 2 * buffer->capacity : 4096;
        while (capacity < buffer->size + size) capacity *= 2;
        char *data = PyMem_Realloc(buffer->data, (size_t)capacity);
        if (data == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        buffer->data = data;
        buffer->capacity = capacity;
    }
    memcpy(buffer->data + buffer->size, value, (size_t)size);
    buffer->size += size;
    return 0;
}

static int buffer_flush(Buffer *buffer, PyObject *column) {
    if (buffer->size == 0) return 0;
    PyObject *view = PyMemoryView_FromMemory(buffer->data, buffer->size, PyBUF_READ);
    if (view == NULL) return -1;
    PyObject *done = PyObject_CallMethod(column, "frombytes", "O", view);
    Py_DECREF(view);
    if (done == NULL) return -1;
    Py_DECREF(done);
    buffer->size = 0;
    return 0;
}

/* One cpu_op name's OperatorTotals, its fields held here until the next flush. */
typedef struct {
    PyObject *totals;
    long long calls;
    double total_us;
    double max_us;
    PyObject *new_max; /* the duration (int or float, as the trace wrote it) that is the new max */
    Buffer durations;
} OperatorSlot;

typedef struct {
    PyObject_HEAD
    PyTypeObject *event_type;
    Py_ssize_t event_offsets[EVENT_FIELDS];
    PyTypeObject *args_type;
    Py_ssize_t args_offsets[ARGS_FIELDS];
    PyObject *collector;
    PyObject *trace;
    PyObject *counts;
    PyObject *operators;
    PyObject *name_index;
    PyObject *names;
    PyObject *thread_index;
    PyObject *threads;
    PyObject *launch_columns[LAUNCH_COLUMNS];
    PyObject *gpu_columns[GPU_COLUMNS];
    PyObject *fold_in_python; /* callable(list of events) */
    PyObject *new_operator;   /* callable(name) -> OperatorTotals */
    PyObject *kernel_class;   /* callable(name id, name) -> class code */
    Buffer launches[LAUNCH_COLUMNS];
    Buffer gpu[GPU_COLUMNS];
    PyObject *window; /* name -> slot index of the operators touched since the last flush */
    OperatorSlot *slots;
    Py_ssize_t slot_count;
    Py_ssize_t slot_capacity;
    signed char *classes; /* kernel class code by name id, -1 when not known yet */
    Py_ssize_t class_capacity;
    PyObject *last_pid, *last_tid; /* the last thread looked up, and its index */
    long last_thread;
    double origin, last_timestamp, cpu_start, cpu_end;
    int has_origin;
    long long x_count;
} Folder;

static PyObject *str_X, *str_origin, *str_last_timestamp, *str_cpu_start, *str_cpu_end;
static PyObject *str_calls, *str_total_us, *str_max_us, *str_durations;

/* The byte offset of a msgspec Struct field (a member descriptor), or -1. */
static Py_ssize_t field_offset(PyTypeObject *type, const char *name) {
    PyObject *descriptor = PyObject_GetAttrString((PyObject *)type, name);
    if (descriptor == NULL) return -1;
    Py_ssize_t offset = -1;
    if (Py_IS_TYPE(descriptor, &PyMemberDescr_Type)) {
        PyMemberDef *member = ((PyMemberDescrObject *)descriptor)->d_member;
        if (member->type == T_OBJECT_EX || member->type == T_OBJECT) offset = member->offset;
    }
    Py_DECREF(descriptor);
    if (offset < 0 && !PyErr_Occurred())
        PyErr_Format(PyExc_TypeError, "%s.%s is not a plain struct field", type->tp_name, name);
    return offset;
}

static inline PyObject *field(PyObject *object, Py_ssize_t offset) {
    PyObject *value = *(PyObject **)((char *)object + offset);
    return value == NULL ? Py_None : value; /* borrowed */
}

/* -- moving state between the Folder and the collector ---------------------------------- */

static int read_double(PyObject *owner, PyObject *name, double *value) {
    PyObject *object = PyObject_GetAttr(owner, name);
    if (object == NULL) return -1;
    *value = PyFloat_AsDouble(object);
    Py_DECREF(object);
    return (*value == -1.0 && PyErr_Occurred()) ? -1 : 0;
}

static int write_double(PyObject *owner, PyObject *name, double value) {
    PyObject *object = PyFloat_FromDouble(value);
    if (object == NULL) return -1;
    int failed = PyObject_SetAttr(owner, name, object);
    Py_DECREF(object);
    return failed;
}

static int load_state(Folder *self) {
    PyObject *origin = PyObject_GetAttr(self->collector, str_origin);
    if (origin == NULL) return -1;
    self->has_origin = origin != Py_None;
    if (self->has_origin) self->origin = PyFloat_AsDouble(origin);
    Py_DECREF(origin);
    if (PyErr_Occurred()) return -1;
    if (read_double(self->collector, str_last_timestamp, &self->last_timestamp) < 0) return -1;
    if (read_double(self->trace, str_cpu_start, &self->cpu_start) < 0) return -1;
    return read_double(self->trace, str_cpu_end, &self->cpu_end);
}

static int flush_operators(Folder *self) {
    for (Py_ssize_t index = 0; index < self->slot_count; index++) {
        OperatorSlot *slot = &self->slots[index];
        PyObject *calls = PyLong_FromLongLong(slot->calls);
        if (calls == NULL) return -1;
        int failed = PyObject_SetAttr(slot->totals, str_calls, calls);
        Py_DECREF(calls);
        if (failed || write_double(slot->totals, str_total_us, slot->total_us) < 0) return -1;
        if (slot->new_max != NULL) {
            failed = PyObject_SetAttr(slot->totals, str_max_us, slot->new_max);
            Py_CLEAR(slot->new_max);
            if (failed) return -1;
        }
        PyObject *durations = PyObject_GetAttr(slot->totals, str_durations);
        if (durations == NULL) return -1;
        failed = buffer_flush(&slot->durations, durations);
        Py_DECREF(durations);
        if (failed) return -1;
        Py_CLEAR(slot->totals);
    }
    self->slot_count = 0;
    PyDict_Clear(self->window);
    return 0;
}

/* Write everything held here back into the collector. */
static int flush(Folder *self) {
    for (int column = 0; column < LAUNCH_COLUMNS; column++)
        if (buffer_flush(&self->launches[column], self->launch_columns[column]) < 0) return -1;
    for (int column = 0; column < GPU_COLUMNS; column++)
        if (buffer_flush(&self->gpu[column], self->gpu_columns[column]) < 0) return -1;
    if (flush_operators(self) < 0) return -1;
    if (self->x_count) {
        PyObject *count = PyDict_GetItemWithError(self->counts, str_X); /* borrowed */
        if (count == NULL && PyErr_Occurred()) return -1;
        long long before = count == NULL ? 0 : PyLong_AsLongLong(count);
        if (before == -1 && PyErr_Occurred()) return -1;
        PyObject *total = PyLong_FromLongLong(before + self->x_count);
        if (total == NULL) return -1;
        int failed = PyDict_SetItem(self->counts, str_X, total);
        Py_DECREF(total);
        if (failed) return -1;
        self->x_count = 0;
    }
    if (write_double(self->collector, str_last_timestamp, self->last_timestamp) < 0) return -1;
    if (write_double(self->trace, str_cpu_start, self->cpu_start) < 0) return -1;
    return write_double(self->trace, str_cpu_end, self->cpu_end);
}

/* Hand events to the Python fold, in order, with the state in the collector meanwhile. */
static int fold_in_python(Folder *self, PyObject *pending) {
    if (PyList_GET_SIZE(pending) == 0) return 0;
    if (flush(self) < 0) return -1;
    PyObject *done = PyObject_CallOneArg(self->fold_in_python, pending);
    if (done == NULL) return -1;
    Py_DECREF(done);
    if (PyList_SetSlice(pending, 0, PyList_GET_SIZE(pending), NULL) < 0) return -1;
    return load_state(self);
}

/* -- interning -------------------------------------------------------------------------- */

/* The index of ``name`` in trace.names, appending it when new (_Collector._name_id). */
static long name_id(Folder *self, PyObject *name) {
    PyObject *index = PyDict_GetItemWithError(self->name_index, name);
    if (index != NULL) return PyLong_AsLong(index);
    if (PyErr_Occurred()) return -1;
    Py_ssize_t next = PyList_GET_SIZE(self->names);
    PyObject *next_index = PyLong_FromSsize_t(next);
    if (next_index == NULL) return -1;
    int failed = PyDict_SetItem(self->name_index, name, next_index);
    Py_DECREF(next_index);
    if (failed || PyList_Append(self->names, name) < 0) return -1;
    return (long)next;
}

/* The index of (pid, tid) in trace.threads, appending it when new (_Collector._thread_of). */
static long thread_of(Folder *self, PyObject *pid, PyObject *tid) {
    if (self->last_pid != NULL) {
        int same = PyObject_RichCompareBool(pid, self->last_pid, Py_EQ);
        if (same < 0) return -1;
        if (same) {
            same = PyObject_RichCompareBool(tid, self->last_tid, Py_EQ);
            if (same < 0) return -1;
            /* equal keys hash alike (a dict lookup would find the same entry) when both are
             * plain ints or strings, which is all this cache is used for */
            if (same) return self->last_thread;
        }
    }
    PyObject *key = PyTuple_Pack(2, pid, tid);
    if (key == NULL) return -1;
    long found;
    PyObject *index = PyDict_GetItemWithError(self->thread_index, key);
    if (index != NULL) {
        found = PyLong_AsLong(index);
    } else if (PyErr_Occurred()) {
        found = -1;
    } else {
        Py_ssize_t next = PyList_GET_SIZE(self->threads);
        PyObject *next_index = PyLong_FromSsize_t(next);
        found = (long)next;
        if (next_index == NULL || PyDict_SetItem(self->thread_index, key, next_index) < 0 ||
            PyList_Append(self->threads, key) < 0)
            found = -1;
        Py_XDECREF(next_index);
    }
    Py_DECREF(key);
    if (found >= 0 && (PyLong_CheckExact(pid) || PyUnicode_CheckExact(pid)) &&
        (PyLong_CheckExact(tid) || PyUnicode_CheckExact(tid))) {
        Py_INCREF(pid);
        Py_INCREF(tid);
        Py_XSETREF(self->last_pid, pid);
        Py_XSETREF(self->last_tid, tid);
        self->last_thread = found;
    }
    return found;
}

static int kernel_class_of(Folder *self, long name, PyObject *text) {
    if (name >= self->class_capacity) {
        Py_ssize_t capacity = self->class_capacity ? self->class_capacity : 256;
        while (capacity <= name) capacity *= 2;
        signed char *classes = PyMem_Realloc(self->classes, (size_t)capacity);
        if (classes == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        memset(classes + self->class_capacity, -1, (size_t)(capacity - self->class_capacity));
        self->classes = classes;
        self->class_capacity = capacity;
    }
    if (self->classes[name] < 0) {
        PyObject *code = PyObject_CallFunction(self->kernel_class, "lO", name, text);
        if (code == NULL) return -1;
        long value = PyLong_AsLong(code);
        Py_DECREF(code);
        if (value == -1 && PyErr_Occurred()) return -1;
        self->classes[name] = (signed char)value;
    }
    return self->classes[name];
}

static OperatorSlot *operator_slot(Folder *self, PyObject *name) {
    PyObject *index = PyDict_GetItemWithError(self->window, name);
    if (index != NULL) return &self->slots[PyLong_AsSsize_t(index)];
    if (PyErr_Occurred()) return NULL;
    PyObject *totals = PyDict_GetItemWithError(self->operators, name);
    if (totals != NULL) {
        Py_INCREF(totals);
    } else {
        if (PyErr_Occurred()) return NULL;
        totals = PyObject_CallOneArg(self->new_operator, name);
        if (totals == NULL) return NULL;
    }
    if (self->slot_count == self->slot_capacity) {
        Py_ssize_t capacity = self->slot_capacity ? 2 * self->slot_capacity : 64;
        OperatorSlot *slots = PyMem_Realloc(self->slots, (size_t)capacity * sizeof(OperatorSlot));
        if (slots == NULL) {
            Py_DECREF(totals);
            PyErr_NoMemory();
            return NULL;
        }
        memset(slots + self->slot_capacity, 0,
               (size_t)(capacity - self->slot_capacity) * sizeof(OperatorSlot));
        self->slots = slots;
        self->slot_capacity = capacity;
    }
    OperatorSlot *slot = &self->slots[self->slot_count];
    slot->totals = totals;
    slot->new_max = NULL;
    PyObject *calls = PyObject_GetAttr(totals, str_calls);
    if (calls == NULL) return NULL;
    slot->calls = PyLong_AsLongLong(calls);
    Py_DECREF(calls);
    if (PyErr_Occurred() || read_double(totals, str_total_us, &slot->total_us) < 0 ||
        read_double(totals, str_max_us, &slot->max_us) < 0) {
        Py_CLEAR(slot->totals);
        return NULL;
    }
    PyObject *slot_index = PyLong_FromSsize_t(self->slot_count);
    if (slot_index == NULL) return NULL;
    int failed = PyDict_SetItem(self->window, name, slot_index);
    Py_DECREF(slot_index);
    if (failed) return NULL;
    self->slot_count++;
    return slot;
}

/* -- reading one event ------------------------------------------------------------------ */

/* A timestamp or duration the C fold can take: a float, or an int that converts exactly. */
static int plain_number(PyObject *value, double *number) {
    if (PyFloat_CheckExact(value)) {
        *number = PyFloat_AS_DOUBLE(value);
        return 1;
    }
    if (PyLong_CheckExact(value)) {
        int overflow;
        long long integer = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (overflow || integer > EXACT_INTEGER_LIMIT || integer < -EXACT_INTEGER_LIMIT) return 0;
        *number = (double)integer;
        return 1;
    }
    return 0;
}

static int equals(PyObject *text, const char *expected, Py_ssize_t length) {
    return PyUnicode_GET_LENGTH(text) == length && PyUnicode_KIND(text) == PyUnicode_1BYTE_KIND &&
           memcmp(PyUnicode_DATA(text), expected, (size_t)length) == 0;
}

/* Which fold a category takes; only exactly these spellings (link.py lower-cases the rest). */
static int kind_of(PyObject *category) {
    if (equals(category, "cpu_op", 6)) return KIND_CPU_OP;
    if (equals(category, "cuda_runtime", 12) || equals(category, "cuda_driver", 11))
        return KIND_RUNTIME;
    if (equals(category, "kernel", 6) || equals(category, "gpu_memcpy", 10) ||
        equals(category, "gpu_memset", 10))
        return KIND_GPU;
    if (equals(category, "gpu_user_annotation", 19) || equals(category, "cuda_sync", 9))
        return KIND_GPU_SIDE;
    return KIND_OTHER;
}

/* An ``args`` value as a column stores it: 1 (an int, *value set), 0 (not one: the column's
 * default), -1 (too large for the column: Python raises, so Python folds it). */
static int column_integer(PyObject *value, int bool_counts, long long *number) {
    if (!(bool_counts ? PyLong_Check(value) : PyLong_CheckExact(value))) return 0;
    int overflow;
    *number = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow > 0) return -1;
    if (overflow < 0) return bool_counts ? 0 : -1; /* below zero: no link, or too small */
    return 1;
}

/* Fold one struct event; 0 when the Python fold must take it (nothing changed then). */
static int fold_event(Folder *self, PyObject *event) {
    const Py_ssize_t *at = self->event_offsets;
    PyObject *phase = field(event, at[F_PH]);
    if (!PyUnicode_CheckExact(phase)) return 0;
    if (!equals(phase, "X", 1)) {
        if (equals(phase, "B", 1) || equals(phase, "E", 1) || equals(phase, "M", 1)) return 0;
        PyObject *count = PyDict_GetItemWithError(self->counts, phase);
        if (count == NULL && PyErr_Occurred()) return -1;
        long long before = count == NULL ? 0 : PyLong_AsLongLong(count);
        if (before == -1 && PyErr_Occurred()) return -1;
        PyObject *total = PyLong_FromLongLong(before + 1);
        if (total == NULL) return -1;
        int failed = PyDict_SetItem(self->counts, phase, total);
        Py_DECREF(total);
        return failed ? -1 : 1;
    }
    if (!self->has_origin) return 0;
    PyObject *category = field(event, at[F_CAT]);
    PyObject *name = field(event, at[F_NAME]);
    if (!PyUnicode_CheckExact(category) || !PyUnicode_CheckExact(name)) return 0;
    int kind = kind_of(category);
    double timestamp, length;
    if (kind == KIND_OTHER || !plain_number(field(event, at[F_TS]), &timestamp) ||
        !plain_number(field(event, at[F_DUR]), &length))
        return 0;
    PyObject *args = field(event, at[F_ARGS]);
    if (args != Py_None && Py_TYPE(args) != self->args_type) return 0;
    long long correlation = NO_LINK, size = 0;
    int has_correlation = 0;
    if (args != Py_None && (kind == KIND_RUNTIME || kind == KIND_GPU)) {
        int bool_counts = kind == KIND_GPU; /* isinstance(..., int) there, type() is int here */
        has_correlation = column_integer(field(args, self->args_offsets[A_CORRELATION]),
                                         bool_counts, &correlation);
        if (has_correlation < 0) return 0;
        if (kind == KIND_GPU) {
            if (!has_correlation || correlation < 0) correlation = NO_LINK;
            int has_size = column_integer(field(args, self->args_offsets[A_BYTES]), 1, &size);
            if (has_size < 0) return 0;
            if (!has_size || size < 0) size = 0;
        }
    }
    if (self->x_count == 0 && !PyDict_Contains(self->counts, str_X)) {
        /* keep the phases in the order the Python fold first counts them */
        PyObject *zero = PyLong_FromLong(0);
        if (zero == NULL || PyDict_SetItem(self->counts, str_X, zero) < 0) {
            Py_XDECREF(zero);
            return -1;
        }
        Py_DECREF(zero);
    }
    self->x_count++;
    double start = timestamp - self->origin;
    double end = start + length;
    if (end > self->last_timestamp) self->last_timestamp = end;
    if (kind == KIND_GPU_SIDE) return 1;
    if (kind == KIND_GPU) {
        long stream = thread_of(self, field(event, at[F_PID]), field(event, at[F_TID]));
        if (stream < 0) return -1;
        long name_index = name_id(self, name);
        if (name_index < 0) return -1;
        int kernel_class = kernel_class_of(self, name_index, name);
        if (kernel_class < 0) return -1;
        signed char class_code = (signed char)kernel_class;
        Buffer *gpu = self->gpu;
        if (buffer_put(&gpu[G_NAME], &name_index, sizeof(long)) < 0 ||
            buffer_put(&gpu[G_CLASS], &class_code, 1) < 0 ||
            buffer_put(&gpu[G_STREAM], &stream, sizeof(long)) < 0 ||
            buffer_put(&gpu[G_START], &start, sizeof(double)) < 0 ||
            buffer_put(&gpu[G_DURATION], &length, sizeof(double)) < 0 ||
            buffer_put(&gpu[G_CORRELATION], &correlation, sizeof(long long)) < 0 ||
            buffer_put(&gpu[G_BYTES], &size, sizeof(long long)) < 0)
            return -1;
        return 1;
    }
    if (start < self->cpu_start) self->cpu_start = start;
    if (end > self->cpu_end) self->cpu_end = end;
    if (kind == KIND_CPU_OP) {
        OperatorSlot *slot = operator_slot(self, name);
        if (slot == NULL) return -1;
        slot->calls++;
        slot->total_us += length;
        if (length > slot->max_us) {
            slot->max_us = length;
            Py_XSETREF(slot->new_max, Py_NewRef(field(event, at[F_DUR])));
        }
        return buffer_put(&slot->durations, &length, sizeof(double)) < 0 ? -1 : 1;
    }
    if (!has_correlation) return 1; /* a runtime call without a correlation id */
    long name_index = name_id(self, name);
    if (name_index < 0) return -1;
    long thread = thread_of(self, field(event, at[F_PID]), field(event, at[F_TID]));
    if (thread < 0) return -1;
    Buffer *launches = self->launches;
    if (buffer_put(&launches[L_NAME], &name_index, sizeof(long)) < 0 ||
        buffer_put(&launches[L_THREAD], &thread, sizeof(long)) < 0 ||
        buffer_put(&launches[L_START], &start, sizeof(double)) < 0 ||
        buffer_put(&launches[L_DURATION], &length, sizeof(double)) < 0 ||
        buffer_put(&launches[L_CORRELATION], &correlation, sizeof(long long)) < 0)
        return -1;
    return 1;
}

/* -- the Folder type -------------------------------------------------------------------- */

PyDoc_STRVAR(fold_doc,
             "fold(events)\n--\n\n"
             "Fold a batch of events (LinkEvent structs or dicts) into the collector.");

static PyObject *Folder_fold(Folder *self, PyObject *events) {
    if (!PyList_CheckExact(events)) {
        PyErr_SetString(PyExc_TypeError, "fold() takes a list of events");
        return NULL;
    }
    PyObject *pending = PyList_New(0);
    if (pending == NULL) return NULL;
    if (load_state(self) < 0) goto failed;
    for (Py_ssize_t index = 0; index < PyList_GET_SIZE(events); index++) {
        PyObject *event = PyList_GET_ITEM(events, index); /* borrowed; the list holds it */
        int folded = 0;
        if (Py_TYPE(event) == self->event_type) {
            if (PyList_GET_SIZE(pending) && fold_in_python(self, pending) < 0) goto failed;
            folded = fold_event(self, event);
            if (folded < 0) goto failed;
        }
        if (!folded && PyList_Append(pending, event) < 0) goto failed;
    }
    if (fold_in_python(self, pending) < 0 || flush(self) < 0) goto failed;
    Py_DECREF(pending);
    Py_RETURN_NONE;
failed:
    Py_DECREF(pending);
    return NULL;
}

static int Folder_init(Folder *self, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"collector",     "trace",        "event_type",  "args_type",
                               "fold_in_python", "new_operator", "kernel_class", NULL};
    PyObject *collector, *trace, *event_type, *args_type, *python_fold, *new_operator, *classes;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO!O!OOO", keywords, &collector, &trace,
                                     &PyType_Type, &event_type, &PyType_Type, &args_type,
                                     &python_fold, &new_operator, &classes))
        return -1;
    if (self->collector != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "a Folder is initialised once");
        return -1;
    }
    self->event_type = (PyTypeObject *)Py_NewRef(event_type);
    self->args_type = (PyTypeObject *)Py_NewRef(args_type);
    for (int index = 0; index < EVENT_FIELDS; index++)
        if ((self->event_offsets[index] =
                 field_offset(self->event_type, EVENT_FIELD_NAMES[index])) < 0)
            return -1;
    for (int index = 0; index < ARGS_FIELDS; index++)
        if ((self->args_offsets[index] = field_offset(self->args_type, ARGS_FIELD_NAMES[index])) <
            0)
            return -1;
    self->collector = Py_NewRef(collector);
    self->trace = Py_NewRef(trace);
    self->fold_in_python = Py_NewRef(python_fold);
    self->new_operator = Py_NewRef(new_operator);
    self->kernel_class = Py_NewRef(classes);
    if ((self->window = PyDict_New()) == NULL) return -1;
    /* (owner, attribute, where to keep it, whether it must be a dict or a list) */
    struct {
        PyObject *owner;
        const char *name;
        PyObject **slot;
        int is_dict;
    } shared[] = {
        {collector, "_counts", &self->counts, 1},
        {trace, "cpu_operators", &self->operators, 1},
        {collector, "_name_index", &self->name_index, 1},
        {trace, "names", &self->names, 0},
        {collector, "_thread_index", &self->thread_index, 1},
        {trace, "threads", &self->threads, 0},
    };
    for (size_t index = 0; index < sizeof(shared) / sizeof(shared[0]); index++) {
        PyObject *value = PyObject_GetAttrString(shared[index].owner, shared[index].name);
        if (value == NULL) return -1;
        *shared[index].slot = value;
        if (shared[index].is_dict ? !PyDict_Check(value) : !PyList_CheckExact(value)) {
            PyErr_Format(PyExc_TypeError, "%s is not a %s", shared[index].name,
                         shared[index].is_dict ? "dict" : "list");
            return -1;
        }
    }
    static const char *launch_names[LAUNCH_COLUMNS] = {"name", "thread", "start", "duration",
                                                       "correlation"};
    static const char *gpu_names[GPU_COLUMNS] = {"name",     "kernel_class", "stream", "start",
                                                 "duration", "correlation",  "bytes"};
    PyObject *launches = PyObject_GetAttrString(trace, "launches");
    PyObject *gpu = launches ? PyObject_GetAttrString(trace, "gpu") : NULL;
    int failed = gpu == NULL;
    for (int index = 0; !failed && index < LAUNCH_COLUMNS; index++)
        failed = (self->launch_columns[index] =
                      PyObject_GetAttrString(launches, launch_names[index])) == NULL;
    for (int index = 0; !failed && index < GPU_COLUMNS; index++)
        failed = (self->gpu_columns[index] = PyObject_GetAttrString(gpu, gpu_names[index])) ==
                 NULL;
    Py_XDECREF(launches);
    Py_XDECREF(gpu);
    return failed ? -1 : 0;
}

static int Folder_traverse(Folder *self, visitproc visit, void *arg) {
    Py_VISIT(self->collector);
    Py_VISIT(self->trace);
    Py_VISIT(self->fold_in_python);
    Py_VISIT(self->new_operator);
    Py_VISIT(self->kernel_class);
    return 0;
}

static int Folder_clear(Folder *self) {
    Py_CLEAR(self->collector);
    Py_CLEAR(self->trace);
    Py_CLEAR(self->fold_in_python);
    Py_CLEAR(self->new_operator);
    Py_CLEAR(self->kernel_class);
    return 0;
}

static void Folder_dealloc(Folder *self) {
    PyObject_GC_UnTrack(self);
    Folder_clear(self);
    Py_CLEAR(self->event_type);
    Py_CLEAR(self->args_type);
    Py_CLEAR(self->counts);
    Py_CLEAR(self->operators);
    Py_CLEAR(self->name_index);
    Py_CLEAR(self->names);
    Py_CLEAR(self->thread_index);
    Py_CLEAR(self->threads);
    Py_CLEAR(self->window);
    Py_CLEAR(self->last_pid);
    Py_CLEAR(self->last_tid);
    for (int index = 0; index < LAUNCH_COLUMNS; index++) {
        Py_CLEAR(self->launch_columns[index]);
        PyMem_Free(self->launches[index].data);
    }
    for (int index = 0; index < GPU_COLUMNS; index++) {
        Py_CLEAR(self->gpu_columns[index]);
        PyMem_Free(self->gpu[index].data);
    }
    for (Py_ssize_t index = 0; index < self->slot_capacity; index++) {
        Py_CLEAR(self->slots[index].totals);
        Py_CLEAR(self->slots[index].new_max);
        PyMem_Free(self->slots[index].durations.data);
    }
    PyMem_Free(self->slots);
    PyMem_Free(self->classes);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef Folder_methods[] = {
    {"fold", (PyCFunction)Folder_fold, METH_O, fold_doc},
    {NULL, NULL, 0, NULL},
};

PyDoc_STRVAR(Folder_doc,
             "Folder(collector, trace, event_type, args_type, fold_in_python, new_operator, "
             "kernel_class)\n--\n\n"
             "The per-event fold of one _Collector, in C (see ncompass/traces/link.py).");

static PyTypeObject FolderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ncompass.traces._fold.Folder",
    .tp_basicsize = sizeof(Folder),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = Folder_doc,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Folder_init,
    .tp_dealloc = (destructor)Folder_dealloc,
    .tp_traverse = (traverseproc)Folder_traverse,
    .tp_clear = (inquiry)Folder_clear,
    .tp_methods = Folder_methods,
};

/* -- linking helpers: index arrays instead of Python dicts and lists ---------------------- */

/* A writable or read-only view of an array.array of the given item size. */
static int column_view(PyObject *column, Py_buffer *view, Py_ssize_t itemsize, int writable) {
    if (PyObject_GetBuffer(column, view, PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    if (view->itemsize != itemsize || view->ndim != 1) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_TypeError, "a column of the wrong item size");
        return -1;
    }
    return 0;
}

static inline uint64_t mix(long long key) {
    uint64_t value = (uint64_t)key * 0x9E3779B97F4A7C15ULL;
    return value ^ (value >> 29);
}

PyDoc_STRVAR(link_correlations_doc,
             "link_correlations(gpu_correlation, launch_correlation, gpu_launch, no_link)\n--\n\n"
             "Set gpu_launch[g] to the last launch whose correlation is gpu_correlation[g].");

static PyObject *link_correlations(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *gpu_column, *launch_column, *out_column;
    long long no_link;
    if (!PyArg_ParseTuple(args, "OOOL", &gpu_column, &launch_column, &out_column, &no_link))
        return NULL;
    Py_buffer gpu, launches, out;
    if (column_view(gpu_column, &gpu, sizeof(long long), 0) < 0) return NULL;
    if (column_view(launch_column, &launches, sizeof(long long), 0) < 0) {
        PyBuffer_Release(&gpu);
        return NULL;
    }
    if (column_view(out_column, &out, sizeof(long), 1) < 0) {
        PyBuffer_Release(&gpu);
        PyBuffer_Release(&launches);
        return NULL;
    }
    const long long *gpu_correlation = gpu.buf, *launch_correlation = launches.buf;
    long *gpu_launch = out.buf;
    Py_ssize_t gpu_count = gpu.len / (Py_ssize_t)sizeof(long long);
    Py_ssize_t launch_count = launches.len / (Py_ssize_t)sizeof(long long);
    PyObject *result = NULL;
    /* an open-addressing table of the GPU events' correlations: slot -> first GPU event, and
     * each GPU event -> the next one with the same correlation */
    size_t capacity = 16;
    while (capacity < 2 * (size_t)gpu_count) capacity *= 2;
    Py_ssize_t *table = PyMem_Malloc(capacity * sizeof(Py_ssize_t));
    Py_ssize_t *next = PyMem_Malloc(((size_t)gpu_count + 1) * sizeof(Py_ssize_t));
    if (table == NULL || next == NULL || out.len / (Py_ssize_t)sizeof(long) != gpu_count) {
        if (table == NULL || next == NULL) PyErr_NoMemory();
        else PyErr_SetString(PyExc_ValueError, "gpu_launch has the wrong length");
        goto done;
    }
    for (size_t slot = 0; slot < capacity; slot++) table[slot] = -1;
    for (Py_ssize_t index = gpu_count - 1; index >= 0; index--) {
        next[index] = -1;
        if (gpu_correlation[index] == no_link) continue;
        size_t slot = mix(gpu_correlation[index]) & (capacity - 1);
        while (table[slot] >= 0 && gpu_correlation[table[slot]] != gpu_correlation[index])
            slot = (slot + 1) & (capacity - 1);
        next[index] = table[slot]; /* file order kept along each chain */
        table[slot] = index;
    }
    for (Py_ssize_t launch = 0; launch < launch_count; launch++) {
        size_t slot = mix(launch_correlation[launch]) & (capacity - 1);
        while (table[slot] >= 0 && gpu_correlation[table[slot]] != launch_correlation[launch])
            slot = (slot + 1) & (capacity - 1);
        for (Py_ssize_t index = table[slot]; index >= 0; index = next[index])
            gpu_launch[index] = (long)launch;
    }
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(table);
    PyMem_Free(next);
    PyBuffer_Release(&gpu);
    PyBuffer_Release(&launches);
    PyBuffer_Release(&out);
    return result;
}

typedef struct {
    double start;
    long index;
} StartOrder;

static int by_start_then_index(const void *left, const void *right) {
    const StartOrder *a = left, *b = right;
    if (a->start < b->start) return -1;
    if (b->start < a->start) return 1;
    return (a->index > b->index) - (a->index < b->index);
}

PyDoc_STRVAR(launches_in_time_order_doc,
             "launches_in_time_order(thread_column, start_column, thread, out)\n--\n\n"
             "Append to out the launches on thread in order of start (ties in file order); "
             "False (out untouched) when a start is NaN.");

static PyObject *launches_in_time_order(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *thread_column, *start_column, *out;
    long thread;
    if (!PyArg_ParseTuple(args, "OOlO", &thread_column, &start_column, &thread, &out)) return NULL;
    Py_buffer threads, starts;
    if (column_view(thread_column, &threads, sizeof(long), 0) < 0) return NULL;
    if (column_view(start_column, &starts, sizeof(double), 0) < 0) {
        PyBuffer_Release(&threads);
        return NULL;
    }
    PyObject *result = NULL;
    const long *thread_of = threads.buf;
    const double *start = starts.buf;
    Py_ssize_t count = threads.len / (Py_ssize_t)sizeof(long), selected = 0;
    StartOrder *order = PyMem_Malloc(((size_t)count + 1) * sizeof(StartOrder));
    if (order == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t index = 0; index < count; index++) {
        if (thread_of[index] != thread) continue;
        if (start[index] != start[index]) { /* NaN: Python's sort decides where it goes */
            result = Py_NewRef(Py_False);
            goto done;
        }
        order[selected].start = start[index];
        order[selected].index = (long)index;
        selected++;
    }
    qsort(order, (size_t)selected, sizeof(StartOrder), by_start_then_index);
    Buffer indices = {NULL, 0, 0};
    for (Py_ssize_t index = 0; index < selected; index++)
        if (buffer_put(&indices, &order[index].index, sizeof(long)) < 0) {
            PyMem_Free(indices.data);
            goto done;
        }
    int failed = buffer_flush(&indices, out);
    PyMem_Free(indices.data);
    if (!failed) result = Py_NewRef(Py_True);
done:
    PyMem_Free(order);
    PyBuffer_Release(&threads);
    PyBuffer_Release(&starts);
    return result;
}

static PyMethodDef module_functions[] = {
    {"link_correlations", link_correlations, METH_VARARGS, link_correlations_doc},
    {"launches_in_time_order", launches_in_time_order, METH_VARARGS,
     launches_in_time_order_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef fold_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_fold",
    .m_doc = "The per-event fold of trace linking, in C.",
    .m_size = -1,
    .m_methods = module_functions,
};

PyMODINIT_FUNC PyInit__fold(void) {
    if (PyType_Ready(&FolderType) < 0) return NULL;
    struct {
        PyObject **slot;
        const char *text;
    } names[] = {
        {&str_X, "X"},
        {&str_origin, "_origin"},
        {&str_last_timestamp, "_last_timestamp"},
        {&str_cpu_start, "cpu_start"},
        {&str_cpu_end, "cpu_end"},
        {&str_calls, "calls"},
        {&str_total_us, "total_us"},
        {&str_max_us, "max_us"},
        {&str_durations, "durations"},
    };
    for (size_t index = 0; index < sizeof(names) / sizeof(names[0]); index++)
        if ((*names[index].slot = PyUnicode_InternFromString(names[index].text)) == NULL)
            return NULL;
    PyObject *module = PyModule_Create(&fold_module);
    if (module == NULL) return NULL;
    if (PyModule_AddObjectRef(module, "Folder", (PyObject *)&FolderType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
