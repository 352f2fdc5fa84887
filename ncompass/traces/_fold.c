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

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Integers beyond 2**53 do not convert to double exactly: Python compares them exactly, so
 * events holding them are left to the Python fold. */
#define EXACT_INTEGER_LIMIT 9007199254740992LL
/* 2**63: a correlation id or byte count from here on (an int, or a float) is refused by the
 * Python fold (_collector._COLUMN_LIMIT), so events holding one are left to it. */
#define COLUMN_LIMIT 9223372036854775808.0
#define NO_LINK (-1)

enum { F_PH, F_CAT, F_NAME, F_PID, F_TID, F_TS, F_DUR, F_ARGS, EVENT_FIELDS };
static const char *const EVENT_FIELD_NAMES[EVENT_FIELDS] = {"ph",  "cat", "name", "pid",
                                                            "tid", "ts",  "dur",  "args"};
enum { A_CORRELATION, A_BYTES, ARGS_FIELDS };
static const char *const ARGS_FIELD_NAMES[ARGS_FIELDS] = {"correlation", "bytes"};

enum { L_NAME, L_THREAD, L_START, L_DURATION, L_CORRELATION, LAUNCH_COLUMNS };
/* Index columns (names, threads, launches, markers) hold 4-byte items, array('i'): 24 bytes a
 * kernel and its launch less than 8-byte ones, in traces made mostly of kernels. */
typedef int32_t Index;
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

/* Append an index to an Index column (OverflowError past 2**31 - 1, which no trace reaches). */
static int put_index(Buffer *buffer, long value) {
    if (value > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "an index beyond 2**31 - 1");
        return -1;
    }
    Index item = (Index)value;
    return buffer_put(buffer, &item, sizeof(Index));
}

#include "_event_text.h"

/* One cpu_op name's OperatorTotals, its fields held here until the next flush. */
typedef struct {
    PyObject *totals;
    long long calls;
    double total_us;
    double max_us;
    PyObject *new_max; /* the duration (int or float, as the trace wrote it) that is the new max */
    Buffer durations;
} OperatorSlot;

/* Tokens of event text (a name with its quotes, a pid) -> the Python value they stand for,
 * made once per distinct token: an open-addressing table of owned keys. */
typedef struct {
    uint64_t hash;
    char *key;
    Py_ssize_t length;
    PyObject *value;
    long name_index;         /* its index in trace.names once looked up, else -1 */
    long long slot_epoch;    /* its operator slot is slot_index while the Folder's */
    Py_ssize_t slot_index;   /* operator_epoch equals slot_epoch */
} Token;

typedef struct {
    Token *slots;
    size_t capacity; /* a power of two, or 0 */
    size_t count;
} TokenTable;

/* A phase counted by events of text, and how many since the last flush. */
#define PHASE_SLOTS 8
#define THREAD_CACHE 8 /* (pid, tid) tokens -> thread index, most recent first */
/* Past this many tokens the table is emptied after a batch: a trace whose names are all
 * distinct (a kernel name per launch) would otherwise keep a second copy of every name here.
 * 4096 tokens of a long kernel name are about 1 MB (32768 were 8 MB, a sixth of what a 40 MB
 * trace of distinct names keeps); a few hundred names and values repeat in most traces. */
#define TOKEN_LIMIT (1 << 12)
typedef struct {
    PyObject *phase;
    long long pending;
} PhaseCount;

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
    PyObject *names;
    /* trace.names by hash: open addressing, name index or -1, 4 bytes a slot (a dict of name ->
     * int cost ~110 bytes a name, which traces whose kernel names are all distinct feel) */
    int32_t *name_table;
    size_t name_capacity;  /* a power of two, at least twice the names indexed */
    Py_ssize_t name_count; /* how many of trace.names the table holds */
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
    int origin_set_here; /* the origin was set by an event folded here: flush writes it */
    long long operator_epoch; /* counts flushes of the operator slots (tokens cache them) */
    PyObject *thread_pids[THREAD_CACHE], *thread_tids[THREAD_CACHE]; /* borrowed tokens */
    long thread_indices[THREAD_CACHE];
    int thread_next;
    long long x_count;
    TokenTable tokens;                  /* tokens of event text -> their Python values */
    PhaseCount phase_counts[PHASE_SLOTS]; /* counted phases of event text, until a flush */
    int phase_slots;
    int folding; /* inside fold(): the Python folds it calls must not fold into it again */
} Folder;

static PyObject *str_X, *str_origin, *str_origin_us, *str_last_timestamp, *str_cpu_start, *str_cpu_end;
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
    self->operator_epoch++;
    PyDict_Clear(self->window);
    return 0;
}

/* Add ``amount`` to counts[phase] (a new phase goes in at the end, as the Python fold adds it). */
static int add_count(PyObject *counts, PyObject *phase, long long amount) {
    PyObject *count = PyDict_GetItemWithError(counts, phase); /* borrowed */
    if (count == NULL && PyErr_Occurred()) return -1;
    long long before = count == NULL ? 0 : PyLong_AsLongLong(count);
    if (before == -1 && PyErr_Occurred()) return -1;
    PyObject *total = PyLong_FromLongLong(before + amount);
    if (total == NULL) return -1;
    int failed = PyDict_SetItem(counts, phase, total);
    Py_DECREF(total);
    return failed;
}

static int flush_phase_counts(Folder *self) {
    for (int index = 0; index < self->phase_slots; index++) {
        PhaseCount *slot = &self->phase_counts[index];
        if (slot->pending && add_count(self->counts, slot->phase, slot->pending) < 0) return -1;
        slot->pending = 0;
    }
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
        if (add_count(self->counts, str_X, self->x_count) < 0) return -1;
        self->x_count = 0;
    }
    if (flush_phase_counts(self) < 0) return -1;
    if (self->origin_set_here) {
        if (write_double(self->collector, str_origin, self->origin) < 0 ||
            write_double(self->trace, str_origin_us, self->origin) < 0)
            return -1;
        self->origin_set_here = 0;
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

/* Put trace.names[index] (hashed as ``hash``) in the table's first free slot from its hash. */
static void name_place(Folder *self, Py_hash_t hash, int32_t index) {
    size_t mask = self->name_capacity - 1, slot = (size_t)hash & mask;
    while (self->name_table[slot] >= 0) slot = (slot + 1) & mask;
    self->name_table[slot] = index;
}

/* Index the names of trace.names the table does not hold yet (all of them after growing it to
 * room for ``wanted`` names). */
static int name_table_sync(Folder *self, Py_ssize_t wanted) {
    if (wanted >= INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "more than 2**31 - 1 distinct event names");
        return -1;
    }
    if ((size_t)wanted * 2 > self->name_capacity) {
        size_t capacity = self->name_capacity ? self->name_capacity : 1024;
        while (capacity < (size_t)wanted * 2) capacity *= 2;
        int32_t *table = PyMem_Malloc(capacity * sizeof(int32_t));
        if (table == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        PyMem_Free(self->name_table);
        self->name_table = table;
        self->name_capacity = capacity;
        self->name_count = 0;
        memset(table, 0xff, capacity * sizeof(int32_t)); /* every slot -1 */
    }
    Py_ssize_t count = PyList_GET_SIZE(self->names);
    for (; self->name_count < count; self->name_count++) {
        Py_hash_t hash = PyObject_Hash(PyList_GET_ITEM(self->names, self->name_count));
        if (hash == -1) return -1;
        name_place(self, hash, (int32_t)self->name_count);
    }
    return 0;
}

/* The index of ``name`` in trace.names, appending it when new (_Collector._name_id): equal
 * names (as a dict compares keys) share one index. */
static long name_id(Folder *self, PyObject *name) {
    Py_hash_t hash = PyObject_Hash(name);
    if (hash == -1) return -1;
    if (name_table_sync(self, PyList_GET_SIZE(self->names) + 1) < 0) return -1;
    size_t mask = self->name_capacity - 1, slot = (size_t)hash & mask;
    for (int32_t index; (index = self->name_table[slot]) >= 0; slot = (slot + 1) & mask) {
        PyObject *known = PyList_GET_ITEM(self->names, index);
        if (known == name) return index;
        Py_hash_t known_hash = PyObject_Hash(known); /* cached in a str */
        if (known_hash == -1) return -1;
        if (known_hash != hash) continue;
        int equal = PyObject_RichCompareBool(known, name, Py_EQ);
        if (equal < 0) return -1;
        if (equal) return index;
    }
    Py_ssize_t next = PyList_GET_SIZE(self->names);
    if (PyList_Append(self->names, name) < 0) return -1;
    self->name_table[slot] = (int32_t)next;
    self->name_count = next + 1;
    return (long)next;
}

PyDoc_STRVAR(Folder_name_id_doc,
             "name_id(name)\n--\n\n"
             "The index of ``name`` in trace.names, appended when new (what the Python fold "
             "interns through while this folder runs).");

static PyObject *Folder_name_id(Folder *self, PyObject *name) {
    long index = name_id(self, name);
    return index < 0 ? NULL : PyLong_FromLong(index);
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
 * default), -1 (too large for the column, a float that large too: Python refuses it, so Python
 * folds it). */
static int column_integer(PyObject *value, int bool_counts, long long *number) {
    if (!(bool_counts ? PyLong_Check(value) : PyLong_CheckExact(value)))
        return PyFloat_CheckExact(value) && PyFloat_AS_DOUBLE(value) >= COLUMN_LIMIT ? -1 : 0;
    int overflow;
    *number = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow > 0) return -1;
    if (overflow < 0) return bool_counts ? 0 : -1; /* below zero: no link, or too small */
    return 1;
}

/* The values of one complete (X) event the C fold takes. */
typedef struct {
    int kind;                     /* KIND_*, not KIND_OTHER */
    PyObject *name, *pid, *tid;   /* borrowed; NULL where the kind does not read them */
    double timestamp, length;
    PyObject *duration;           /* the duration as written (borrowed), or NULL: made from */
    int duration_is_int;          /* length when it becomes an operator's new maximum */
    int has_correlation;
    long long correlation, size;
    Token *token; /* the name's token of event text (caches its name index, slot), or NULL */
    long thread;  /* the (pid, tid) thread when already known, else -1 */
} Complete;

/* A new maximum keeps the duration as the trace wrote it: an int or a float. */
static PyObject *duration_object(const Complete *event) {
    if (event->duration != NULL) return Py_NewRef(event->duration);
    if (event->duration_is_int) return PyLong_FromLongLong((long long)event->length);
    return PyFloat_FromDouble(event->length);
}

/* name_id() of the event's name, remembered by its token when it has one. */
static long cached_name_id(Folder *self, const Complete *event) {
    if (event->token != NULL && event->token->name_index >= 0) return event->token->name_index;
    long index = name_id(self, event->name);
    if (event->token != NULL) event->token->name_index = index;
    return index;
}

/* Fold one complete event (everything _Collector._complete does for its kind); 1, or -1. */
static int fold_complete(Folder *self, const Complete *event) {
    int kind = event->kind;
    double length = event->length;
    long long correlation = event->correlation, size = event->size;
    int has_correlation = event->has_correlation;
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
    double start = event->timestamp - self->origin;
    double end = start + length;
    if (end > self->last_timestamp) self->last_timestamp = end;
    if (kind == KIND_GPU_SIDE) return 1;
    if (kind == KIND_GPU) {
        long stream = event->thread >= 0 ? event->thread : thread_of(self, event->pid, event->tid);
        if (stream < 0) return -1;
        long name_index = cached_name_id(self, event);
        if (name_index < 0) return -1;
        int kernel_class = kernel_class_of(self, name_index, event->name);
        if (kernel_class < 0) return -1;
        signed char class_code = (signed char)kernel_class;
        Buffer *gpu = self->gpu;
        if (put_index(&gpu[G_NAME], name_index) < 0 ||
            buffer_put(&gpu[G_CLASS], &class_code, 1) < 0 ||
            put_index(&gpu[G_STREAM], stream) < 0 ||
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
        OperatorSlot *slot;
        Token *token = event->token;
        if (token != NULL && token->slot_epoch == self->operator_epoch) {
            slot = &self->slots[token->slot_index];
        } else {
            if ((slot = operator_slot(self, event->name)) == NULL) return -1;
            if (token != NULL) {
                token->slot_epoch = self->operator_epoch;
                token->slot_index = slot - self->slots;
            }
        }
        slot->calls++;
        slot->total_us += length;
        if (length > slot->max_us) {
            slot->max_us = length;
            PyObject *maximum = duration_object(event);
            if (maximum == NULL) return -1;
            Py_XSETREF(slot->new_max, maximum);
        }
        return buffer_put(&slot->durations, &length, sizeof(double)) < 0 ? -1 : 1;
    }
    if (!has_correlation) return 1; /* a runtime call without a correlation id */
    long name_index = cached_name_id(self, event);
    if (name_index < 0) return -1;
    long thread = event->thread >= 0 ? event->thread : thread_of(self, event->pid, event->tid);
    if (thread < 0) return -1;
    Buffer *launches = self->launches;
    if (put_index(&launches[L_NAME], name_index) < 0 ||
        put_index(&launches[L_THREAD], thread) < 0 ||
        buffer_put(&launches[L_START], &start, sizeof(double)) < 0 ||
        buffer_put(&launches[L_DURATION], &length, sizeof(double)) < 0 ||
        buffer_put(&launches[L_CORRELATION], &correlation, sizeof(long long)) < 0)
        return -1;
    return 1;
}


/* Fold one struct event; 0 when the Python fold must take it (nothing changed then). */
static int fold_event(Folder *self, PyObject *event) {
    const Py_ssize_t *at = self->event_offsets;
    PyObject *phase = field(event, at[F_PH]);
    if (!PyUnicode_CheckExact(phase)) return 0;
    if (!equals(phase, "X", 1)) {
        if (equals(phase, "B", 1) || equals(phase, "E", 1) || equals(phase, "M", 1)) return 0;
        return add_count(self->counts, phase, 1) < 0 ? -1 : 1;
    }
    if (!self->has_origin) return 0;
    PyObject *category = field(event, at[F_CAT]);
    PyObject *name = field(event, at[F_NAME]);
    if (!PyUnicode_CheckExact(category) || !PyUnicode_CheckExact(name)) return 0;
    int kind = kind_of(category);
    double timestamp, length;
    if (kind == KIND_OTHER || !plain_number(field(event, at[F_TS]), &timestamp) ||
        !plain_number(field(event, at[F_DUR]), &length) || !usable_times(timestamp, length))
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
    Complete complete = {kind, name, field(event, at[F_PID]), field(event, at[F_TID]),
                         timestamp, length, field(event, at[F_DUR]), 0, has_correlation,
                         correlation, size, NULL, -1};
    return fold_complete(self, &complete);
}

/* -- folding events read from text (EventText) ------------------------------------------- */

static inline uint64_t token_hash(const char *key, Py_ssize_t length) {
    uint64_t hash = 0xcbf29ce484222325ULL ^ (uint64_t)length;
    Py_ssize_t index = 0;
    for (; index + 8 <= length; index += 8) {
        uint64_t word;
        memcpy(&word, key + index, 8);
        hash = (hash ^ word) * 0x100000001b3ULL;
        hash ^= hash >> 32;
    }
    for (; index < length; index++) hash = (hash ^ (unsigned char)key[index]) * 0x100000001b3ULL;
    return hash ^ (hash >> 29);
}

/* The token of event text ``key``: a string (its quotes included in the token, no escapes) or
 * an int64, with its Python value made on first sight. NULL with an error. The pointer holds
 * until the next new token (the table may grow). */
static Token *token_of(Folder *self, const char *key, Py_ssize_t length) {
    TokenTable *table = &self->tokens;
    uint64_t hash = token_hash(key, length);
    if (table->capacity) {
        for (size_t slot = hash & (table->capacity - 1);; slot = (slot + 1) & (table->capacity - 1)) {
            Token *token = &table->slots[slot];
            if (token->key == NULL) break;
            if (token->hash == hash && token->length == length &&
                memcmp(token->key, key, (size_t)length) == 0)
                return token;
        }
    }
    if (2 * (table->count + 1) > table->capacity) { /* grow, keeping it at most half full */
        size_t capacity = table->capacity ? 2 * table->capacity : 256;
        Token *slots = PyMem_Calloc(capacity, sizeof(Token));
        if (slots == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        for (size_t old = 0; old < table->capacity; old++) {
            Token *token = &table->slots[old];
            if (token->key == NULL) continue;
            size_t slot = token->hash & (capacity - 1);
            while (slots[slot].key != NULL) slot = (slot + 1) & (capacity - 1);
            slots[slot] = *token;
        }
        PyMem_Free(table->slots);
        table->slots = slots;
        table->capacity = capacity;
    }
    PyObject *value;
    if (key[0] == '"') {
        value = PyUnicode_DecodeUTF8(key + 1, length - 2, NULL);
        /* short strings (phases, categories, most names) are interned; long ones (kernel
         * names, distinct in some traces) not: the interpreter's table would keep an entry
         * for each */
        if (value != NULL && length <= 66) PyUnicode_InternInPlace(&value);
    } else {
        Cursor cursor = {(const unsigned char *)key, (const unsigned char *)key + length};
        Number number;
        long long integer;
        if (!read_number(&cursor, &number) || !number_as_integer(&number, &integer)) {
            PyErr_SetString(PyExc_SystemError, "a token of event text is not an int64");
            return NULL;
        }
        value = PyLong_FromLongLong(integer);
    }
    if (value == NULL) return NULL;
    char *copy = PyMem_Malloc((size_t)length + 1);
    if (copy == NULL) {
        Py_DECREF(value);
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(copy, key, (size_t)length);
    size_t slot = hash & (table->capacity - 1);
    while (table->slots[slot].key != NULL) slot = (slot + 1) & (table->capacity - 1);
    table->slots[slot] = (Token){hash, copy, length, value, -1, -1, 0};
    table->count++;
    return &table->slots[slot];
}

static void clear_tokens(TokenTable *table) {
    for (size_t slot = 0; slot < table->capacity; slot++) {
        PyMem_Free(table->slots[slot].key);
        Py_CLEAR(table->slots[slot].value);
    }
    PyMem_Free(table->slots);
    table->slots = NULL;
    table->capacity = table->count = 0;
}

/* Empty the token table, and what points into it (between batches: nothing is being folded). */
static void forget_tokens(Folder *self) {
    clear_tokens(&self->tokens);
    self->phase_slots = 0; /* their phases were tokens; the counts are flushed */
    for (int index = 0; index < THREAD_CACHE; index++)
        self->thread_pids[index] = self->thread_tids[index] = NULL;
}

/* The value of a span of the text: None when absent. Borrowed, or NULL with an error. */
static PyObject *span_value(Folder *self, const char *base, Span span) {
    if (span.length == 0) return Py_None;
    Token *token = token_of(self, base + span.start, span.length);
    return token == NULL ? NULL : token->value;
}

/* thread_of() for tokens of event text: equal tokens are one object, so a few recent pairs
 * are remembered by identity (GPU events and launches take turns on two threads). */
static long thread_pair(Folder *self, PyObject *pid, PyObject *tid) {
    for (int index = 0; index < THREAD_CACHE; index++)
        if (self->thread_pids[index] == pid && self->thread_tids[index] == tid && pid != NULL)
            return self->thread_indices[index];
    long thread = thread_of(self, pid, tid);
    if (thread < 0) return -1;
    int slot = self->thread_next;
    self->thread_next = (slot + 1) % THREAD_CACHE;
    self->thread_pids[slot] = pid; /* tokens (or None): they live as long as the Folder */
    self->thread_tids[slot] = tid;
    self->thread_indices[slot] = thread;
    return thread;
}

/* Count one event of a phase that is only counted. */
static int count_phase(Folder *self, PyObject *phase) {
    for (int index = 0; index < self->phase_slots; index++)
        if (self->phase_counts[index].phase == phase) {
            self->phase_counts[index].pending++;
            return 0;
        }
    if (self->phase_slots == PHASE_SLOTS) return add_count(self->counts, phase, 1);
    /* keep the phases in the order the Python fold first counts them */
    if (add_count(self->counts, phase, 0) < 0) return -1;
    self->phase_counts[self->phase_slots++] = (PhaseCount){phase, 1}; /* the table owns it */
    return 0;
}

/* An args value as column_integer reads it: 1 (an int, *number set) or 0 (the default). */
static int text_column_integer(int type, long long value, int bool_counts, long long *number) {
    if (type == ARG_INT || (type == ARG_BOOL && bool_counts)) {
        *number = value;
        return 1;
    }
    return 0; /* ARG_ABOVE never gets here; ARG_BELOW only where bools count (parse_events) */
}

static int fold_record(Folder *self, const char *base, const Record *record) {
    if (record->action == R_COUNT) {
        PyObject *phase = span_value(self, base, record->phase);
        return phase == NULL ? -1 : count_phase(self, phase);
    }
    int kind = record->kind;
    Complete event = {kind, NULL, NULL, NULL, record->timestamp, record->duration, NULL,
                      record->dur_is_int, 0, NO_LINK, 0, NULL, -1};
    if (!self->has_origin) { /* the first complete event sets it (_Collector._relative) */
        self->origin = record->timestamp;
        self->has_origin = 1;
        self->origin_set_here = 1;
    }
    if (record->has_args && (kind == KIND_RUNTIME || kind == KIND_GPU)) {
        int bool_counts = kind == KIND_GPU;
        event.has_correlation = text_column_integer(
            record->correlation_type, record->correlation, bool_counts, &event.correlation);
        if (kind == KIND_GPU) {
            if (!event.has_correlation || event.correlation < 0) event.correlation = NO_LINK;
            if (!text_column_integer(record->size_type, record->size, 1, &event.size) ||
                event.size < 0)
                event.size = 0;
        }
    }
    int needs_thread = kind == KIND_GPU || (kind == KIND_RUNTIME && event.has_correlation);
    if (needs_thread) {
        if ((event.pid = span_value(self, base, record->pid)) == NULL ||
            (event.tid = span_value(self, base, record->tid)) == NULL ||
            (event.thread = thread_pair(self, event.pid, event.tid)) < 0)
            return -1;
    }
    if (kind != KIND_GPU_SIDE && (needs_thread || kind == KIND_CPU_OP)) {
        /* last: a new token may move the others, and the fold keeps this one's pointer */
        if ((event.token = token_of(self, base + record->name.start, record->name.length)) == NULL)
            return -1;
        event.name = event.token->value;
    }
    return fold_complete(self, &event);
}

/* Fold an EventText: its records in C, its other events in Python, all in file order. */
static int fold_event_text(Folder *self, EventText *batch, PyObject *pending) {
    const char *base = PyBytes_AS_STRING(batch->text);
    for (Py_ssize_t index = 0; index < batch->count; index++) {
        const Record *record = &batch->records[index];
        if (record->action == R_PYTHON) {
            PyObject *event = PyList_GET_ITEM(batch->python_events, record->python_index);
            if (PyList_Append(pending, event) < 0) return -1;
            continue;
        }
        if (PyList_GET_SIZE(pending) && fold_in_python(self, pending) < 0) return -1;
        if (fold_record(self, base, record) < 0) return -1;
    }
    return 0;
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
    if (self->folding) {
        /* the state (buffers, the token table whose entries the fold points into) would
         * change under the fold in progress */
        PyErr_SetString(PyExc_RuntimeError, "fold() was called again while folding");
        return NULL;
    }
    PyObject *pending = PyList_New(0);
    if (pending == NULL) return NULL;
    PyObject *result = NULL;
    self->folding = 1;
    if (load_state(self) < 0) goto done;
    for (Py_ssize_t index = 0; index < PyList_GET_SIZE(events); index++) {
        /* a reference of its own: the Python folds called meanwhile may change the list */
        PyObject *event = Py_NewRef(PyList_GET_ITEM(events, index));
        int folded = 0;
        if (Py_TYPE(event) == &EventTextType) {
            folded = fold_event_text(self, (EventText *)event, pending) < 0 ? -1 : 1;
        } else if (Py_TYPE(event) == self->event_type) {
            if (PyList_GET_SIZE(pending) && fold_in_python(self, pending) < 0)
                folded = -1;
            else
                folded = fold_event(self, event);
        }
        if (folded == 0) folded = PyList_Append(pending, event) < 0 ? -1 : 1;
        Py_DECREF(event);
        if (folded < 0) goto done;
    }
    if (fold_in_python(self, pending) < 0 || flush(self) < 0) goto done;
    if (self->tokens.count > TOKEN_LIMIT) forget_tokens(self);
    result = Py_NewRef(Py_None);
done:
    self->folding = 0;
    Py_DECREF(pending);
    return result;
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
    PyMem_Free(self->name_table);
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
    clear_tokens(&self->tokens);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef Folder_methods[] = {
    {"fold", (PyCFunction)Folder_fold, METH_O, fold_doc},
    {"name_id", (PyCFunction)Folder_name_id, METH_O, Folder_name_id_doc},
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
             "Set gpu_launch[g] to the last launch whose correlation is gpu_correlation[g]; False "
             "(nothing set) past 2**31 - 2 GPU events, which the Python loop links instead.");

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
    if (column_view(out_column, &out, sizeof(Index), 1) < 0) {
        PyBuffer_Release(&gpu);
        PyBuffer_Release(&launches);
        return NULL;
    }
    const long long *gpu_correlation = gpu.buf, *launch_correlation = launches.buf;
    Index *gpu_launch = out.buf;
    Py_ssize_t gpu_count = gpu.len / (Py_ssize_t)sizeof(long long);
    Py_ssize_t launch_count = launches.len / (Py_ssize_t)sizeof(long long);
    PyObject *result = NULL;
    int32_t *table = NULL, *next = NULL;
    if (out.len / (Py_ssize_t)sizeof(Index) != gpu_count) {
        PyErr_SetString(PyExc_ValueError, "gpu_launch has the wrong length");
        goto done;
    }
    if (gpu_count > INT32_MAX - 1 || launch_count > INT32_MAX) { /* 4-byte indices */
        result = Py_NewRef(Py_False);
        goto done;
    }
    /* an open-addressing table of the GPU events' correlations: slot -> first GPU event, and
     * each GPU event -> the next one with the same correlation */
    size_t capacity = 16; /* at most 3/4 full: 5-11 bytes a GPU event */
    while (capacity * 3 < 4 * (size_t)gpu_count) capacity *= 2;
    table = PyMem_Malloc(capacity * sizeof(int32_t));
    next = PyMem_Malloc(((size_t)gpu_count + 1) * sizeof(int32_t));
    if (table == NULL || next == NULL) {
        PyErr_NoMemory();
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
        table[slot] = (int32_t)index;
    }
    for (Py_ssize_t launch = 0; launch < launch_count; launch++) {
        size_t slot = mix(launch_correlation[launch]) & (capacity - 1);
        while (table[slot] >= 0 && gpu_correlation[table[slot]] != launch_correlation[launch])
            slot = (slot + 1) & (capacity - 1);
        for (int32_t index = table[slot]; index >= 0; index = next[index])
            gpu_launch[index] = (Index)launch;
    }
    result = Py_NewRef(Py_True);
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

PyDoc_STRVAR(launches_on_thread_doc,
             "launches_on_thread(thread_column, thread)\n--\n\n"
             "How many launches are on thread (the length launches_in_time_order fills).");

static PyObject *launches_on_thread(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *thread_column;
    long thread;
    if (!PyArg_ParseTuple(args, "Ol", &thread_column, &thread)) return NULL;
    Py_buffer threads;
    if (column_view(thread_column, &threads, sizeof(Index), 0) < 0) return NULL;
    const Index *thread_of = threads.buf;
    Py_ssize_t count = threads.len / (Py_ssize_t)sizeof(Index), selected = 0;
    for (Py_ssize_t index = 0; index < count; index++) selected += thread_of[index] == thread;
    PyBuffer_Release(&threads);
    return PyLong_FromSsize_t(selected);
}

PyDoc_STRVAR(launches_in_time_order_doc,
             "launches_in_time_order(thread_column, start_column, thread, out)\n--\n\n"
             "Write into out (of launches_on_thread's length) the launches on thread in order of "
             "start (ties in file order); False (out untouched) when a start is NaN. Launches "
             "already in order, as a thread records them, need no more memory than out.");

static PyObject *launches_in_time_order(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *thread_column, *start_column, *out_column;
    long thread;
    if (!PyArg_ParseTuple(args, "OOlO", &thread_column, &start_column, &thread, &out_column))
        return NULL;
    Py_buffer threads, starts, out;
    if (column_view(thread_column, &threads, sizeof(Index), 0) < 0) return NULL;
    if (column_view(start_column, &starts, sizeof(double), 0) < 0) {
        PyBuffer_Release(&threads);
        return NULL;
    }
    if (column_view(out_column, &out, sizeof(long), 1) < 0) {
        PyBuffer_Release(&threads);
        PyBuffer_Release(&starts);
        return NULL;
    }
    PyObject *result = NULL;
    const Index *thread_of = threads.buf;
    const double *start = starts.buf;
    long *indices = out.buf;
    Py_ssize_t count = threads.len / (Py_ssize_t)sizeof(Index), selected = 0;
    Py_ssize_t capacity = out.len / (Py_ssize_t)sizeof(long);
    StartOrder *order = NULL;
    int in_order = 1;
    if (starts.len / (Py_ssize_t)sizeof(double) < count) {
        PyErr_SetString(PyExc_ValueError, "start_column is shorter than thread_column");
        goto done;
    }
    double last = 0.0;
    for (Py_ssize_t index = 0; index < count; index++) {
        if (thread_of[index] != thread) continue;
        if (start[index] != start[index]) { /* NaN: Python's sort decides where it goes */
            result = Py_NewRef(Py_False);
            goto done;
        }
        if (selected > 0 && start[index] < last) in_order = 0;
        last = start[index];
        selected++;
    }
    if (selected != capacity) {
        PyErr_SetString(PyExc_ValueError, "out does not have the thread's launch count");
        goto done;
    }
    if (in_order) {
        selected = 0;
        for (Py_ssize_t index = 0; index < count; index++)
            if (thread_of[index] == thread) indices[selected++] = (long)index;
    } else {
        order = PyMem_Malloc(((size_t)selected + 1) * sizeof(StartOrder));
        if (order == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        selected = 0;
        for (Py_ssize_t index = 0; index < count; index++) {
            if (thread_of[index] != thread) continue;
            order[selected].start = start[index];
            order[selected].index = (long)index;
            selected++;
        }
        qsort(order, (size_t)selected, sizeof(StartOrder), by_start_then_index);
        for (Py_ssize_t index = 0; index < selected; index++) indices[index] = order[index].index;
    }
    result = Py_NewRef(Py_True);
done:
    PyMem_Free(order);
    PyBuffer_Release(&threads);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&out);
    return result;
}

/* math.ulp(value) */
static double ulp(double value) {
    value = fabs(value);
    if (isnan(value) || isinf(value)) return value;
    double above = nextafter(value, INFINITY);
    if (isinf(above)) return value - nextafter(value, -INFINITY);
    return above - value;
}

/* encloses() of _collector.py: [start, end] inside [outer_start, outer_end], with its slack. */
static int encloses(double outer_start, double outer_end, double start, double end) {
    double slack = 4 * ulp(outer_end);
    return outer_start - slack <= start && end <= outer_end + slack;
}

/* The marker index at ``position`` of the stack (a list of ints below ``markers``). */
static int stack_marker(PyObject *stack, Py_ssize_t position, Py_ssize_t markers, long *marker) {
    *marker = PyLong_AsLong(PyList_GET_ITEM(stack, position));
    if (*marker == -1 && PyErr_Occurred()) return -1;
    if (*marker < 0 || *marker >= markers) {
        PyErr_SetString(PyExc_IndexError, "a marker index out of range");
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(assign_launches_doc,
             "assign_launches(launch_start, launch_marker, launch_indices, next_launch, until, "
             "stack, marker_start, marker_end)\n--\n\n"
             "link._assign_launches for ranges that nest: from launch_indices[next_launch] on, "
             "until a launch starts at or after until, pop the ended markers off stack and set "
             "launch_marker[launch] to the innermost open one enclosing the launch's start. "
             "Returns the next launch's position.");

static PyObject *assign_launches(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *start_column, *marker_column, *order_column, *stack, *marker_start_column,
        *marker_end_column;
    Py_ssize_t next;
    double until;
    if (!PyArg_ParseTuple(args, "OOOndO!OO", &start_column, &marker_column, &order_column, &next,
                          &until, &PyList_Type, &stack, &marker_start_column, &marker_end_column))
        return NULL;
    Py_buffer views[5];
    PyObject *columns[5] = {start_column, marker_column, order_column, marker_start_column,
                            marker_end_column};
    Py_ssize_t sizes[5] = {sizeof(double), sizeof(Index), sizeof(long), sizeof(double),
                           sizeof(double)};
    int opened = 0;
    PyObject *result = NULL;
    for (; opened < 5; opened++)
        if (column_view(columns[opened], &views[opened], sizes[opened], opened == 1) < 0) goto done;
    const double *launch_start = views[0].buf, *marker_start = views[3].buf,
                 *marker_end = views[4].buf;
    Index *launch_marker = views[1].buf;
    const long *order = views[2].buf;
    if (views[1].len / (Py_ssize_t)sizeof(Index) < views[0].len / (Py_ssize_t)sizeof(double)) {
        PyErr_SetString(PyExc_IndexError, "launch_marker is shorter than the launches");
        goto done;
    }
    Py_ssize_t launches = views[0].len / (Py_ssize_t)sizeof(double),
               count = views[2].len / (Py_ssize_t)sizeof(long),
               markers = views[3].len / (Py_ssize_t)sizeof(double);
    for (; next < count; next++) {
        long launch = order[next];
        if (launch < 0 || launch >= launches) {
            PyErr_SetString(PyExc_IndexError, "a launch index out of range");
            goto done;
        }
        double start = launch_start[launch];
        if (start >= until) break;
        Py_ssize_t depth = PyList_GET_SIZE(stack);
        long marker;
        while (depth > 0) { /* _pop_ended */
            if (stack_marker(stack, depth - 1, markers, &marker) < 0) goto done;
            if (!(marker_end[marker] < start)) break;
            depth--;
        }
        if (depth < PyList_GET_SIZE(stack) &&
            PyList_SetSlice(stack, depth, PyList_GET_SIZE(stack), NULL) < 0)
            goto done;
        long innermost = NO_LINK; /* _innermost_enclosing */
        for (Py_ssize_t position = depth - 1; position >= 0; position--) {
            if (stack_marker(stack, position, markers, &marker) < 0) goto done;
            if (encloses(marker_start[marker], marker_end[marker], start, start)) {
                innermost = marker;
                break;
            }
        }
        launch_marker[launch] = (Index)innermost;
    }
    result = PyLong_FromSsize_t(next);
done:
    for (int index = 0; index < opened; index++) PyBuffer_Release(&views[index]);
    return result;
}

static PyMethodDef module_functions[] = {
    {"link_correlations", link_correlations, METH_VARARGS, link_correlations_doc},
    {"launches_on_thread", launches_on_thread, METH_VARARGS, launches_on_thread_doc},
    {"launches_in_time_order", launches_in_time_order, METH_VARARGS,
     launches_in_time_order_doc},
    {"parse_events", parse_events, METH_VARARGS, parse_events_doc},
    {"object_members", object_members, METH_VARARGS, object_members_doc},
    {"assign_launches", assign_launches, METH_VARARGS, assign_launches_doc},
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
    if (PyType_Ready(&FolderType) < 0 || PyType_Ready(&EventTextType) < 0) return NULL;
    struct {
        PyObject **slot;
        const char *text;
    } names[] = {
        {&str_X, "X"},
        {&str_origin, "_origin"},
        {&str_origin_us, "origin_us"},
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
    if (PyModule_AddObjectRef(module, "Folder", (PyObject *)&FolderType) < 0 ||
        PyModule_AddObjectRef(module, "EventText", (PyObject *)&EventTextType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
