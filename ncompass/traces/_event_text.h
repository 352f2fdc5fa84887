/* Events read straight from a batch of trace JSON text, for _fold.c (included there, once).
 *
 * parse_events(text, decode) reads the text of a JSON array of events (what the scanner cuts)
 * into an EventText: one compact record per event, holding where its strings are in the text
 * and its numbers already converted, so the Folder folds the common events without making a
 * Python object for any of them. The events the C fold would hand to Python anyway (markers,
 * begin/end pairs, metadata, odd types, strings with escapes) are decoded by ``decode`` (the
 * msgspec decoder of LinkEvent structs) in one call, and kept in file order.
 *
 * It returns None when anything about the text is unusual (not valid JSON as _json_text.h
 * reads it, a key spelled with escapes, a field given twice, args that is not an object, the
 * decoder refusing the other events): the caller then decodes the whole text the general way.
 * So a record exists only where the struct fold would have read the same values.
 */
#include <math.h>

#include "_json_text.h"

enum { R_PYTHON, R_COUNT, R_COMPLETE }; /* what the fold does with a record */

/* Where a token is in the text (strings with their quotes); length 0: absent or null. */
typedef struct {
    Py_ssize_t start;
    Py_ssize_t length;
} Span;

/* An args value as a column reads it (see column_integer in _fold.c). */
enum { ARG_OTHER, ARG_INT, ARG_BOOL, ARG_ABOVE, ARG_BELOW };

typedef struct {
    unsigned char action;     /* R_* */
    unsigned char kind;       /* KIND_* (R_COMPLETE) */
    unsigned char dur_is_int; /* how the duration was written (the new maximum keeps it) */
    unsigned char has_args;
    unsigned char correlation_type, size_type; /* ARG_* */
    Span name, pid, tid, phase;
    double timestamp, duration;
    long long correlation, size;
    Py_ssize_t python_index; /* R_PYTHON: index into EventText.python_events */
} Record;

typedef struct {
    PyObject_HEAD
    PyObject *text;           /* the bytes the spans point into */
    PyObject *python_events;  /* list: LinkEvent structs of the R_PYTHON records, in order */
    Record *records;
    Py_ssize_t count;
} EventText;

static int EventText_traverse(EventText *self, visitproc visit, void *arg) {
    Py_VISIT(self->python_events);
    return 0;
}

static int EventText_clear(EventText *self) {
    Py_CLEAR(self->python_events);
    return 0;
}

static void EventText_dealloc(EventText *self) {
    PyObject_GC_UnTrack(self);
    EventText_clear(self);
    Py_CLEAR(self->text);
    PyMem_Free(self->records);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t EventText_length(EventText *self) { return self->count; }

static PySequenceMethods EventText_sequence = {.sq_length = (lenfunc)EventText_length};

static PyTypeObject EventTextType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ncompass.traces._fold.EventText",
    .tp_basicsize = sizeof(EventText),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A batch of trace events read from JSON text (see parse_events); len() counts "
              "its events.",
    .tp_dealloc = (destructor)EventText_dealloc,
    .tp_traverse = (traverseproc)EventText_traverse,
    .tp_clear = (inquiry)EventText_clear,
    .tp_as_sequence = &EventText_sequence,
};

static int span_equals(const unsigned char *base, Span span, const char *quoted) {
    size_t length = strlen(quoted);
    return (size_t)span.length == length && memcmp(base + span.start, quoted, length) == 0;
}

/* Which fold a category takes (kind_of in _fold.c, read from the quoted text). */
static int kind_of_text(const unsigned char *base, Span category) {
    if (span_equals(base, category, "\"cpu_op\"")) return KIND_CPU_OP;
    if (span_equals(base, category, "\"cuda_runtime\"") ||
        span_equals(base, category, "\"cuda_driver\""))
        return KIND_RUNTIME;
    if (span_equals(base, category, "\"kernel\"") ||
        span_equals(base, category, "\"gpu_memcpy\"") ||
        span_equals(base, category, "\"gpu_memset\""))
        return KIND_GPU;
    if (span_equals(base, category, "\"gpu_user_annotation\"") ||
        span_equals(base, category, "\"cuda_sync\""))
        return KIND_GPU_SIDE;
    return KIND_OTHER;
}

/* One value of a field the fold reads, as found. */
enum { V_ABSENT, V_STRING, V_ESCAPED, V_INTEGER, V_FLOAT, V_TRUE, V_FALSE, V_OTHER };

typedef struct {
    int type;
    Span span;
    Number number;
} Value;

/* Read the value at the cursor into ``value`` (anything else skipped); 1 when valid. */
static int read_value(Cursor *cursor, const unsigned char *base, Value *value) {
    const unsigned char *start = cursor->at;
    if (start >= cursor->end) return 0;
    unsigned char first = *start;
    if (first == '"') {
        int escaped;
        if (!read_string(cursor, &escaped)) return 0;
        value->type = escaped ? V_ESCAPED : V_STRING;
    } else if (first == '-' || (first >= '0' && first <= '9')) {
        if (!read_number(cursor, &value->number)) return 0;
        value->type = value->number.is_integer ? V_INTEGER : V_FLOAT;
    } else if (first == 'n') {
        if (!read_literal(cursor, "null", 4)) return 0;
        value->type = V_ABSENT; /* a struct field holds None either way */
    } else if (first == 't' || first == 'f') {
        if (!skip_value(cursor, 1)) return 0;
        value->type = first == 't' ? V_TRUE : V_FALSE;
    } else {
        if (!skip_value(cursor, 1)) return 0;
        value->type = V_OTHER;
    }
    value->span.start = start - base;
    value->span.length = value->type == V_ABSENT ? 0 : cursor->at - start;
    return 1;
}

/* Read a key at the cursor (a string) and the ':' after it; *key is its text without quotes,
 * NULL when it is spelled with escapes (then it may be any key: the caller gives up). */
static int read_key(Cursor *cursor, const unsigned char **key, Py_ssize_t *length) {
    if (cursor->at >= cursor->end || *cursor->at != '"') return 0;
    const unsigned char *start = cursor->at + 1;
    int escaped;
    if (!read_string(cursor, &escaped)) return 0;
    *key = escaped ? NULL : start;
    *length = cursor->at - 1 - start;
    skip_whitespace(cursor);
    if (cursor->at >= cursor->end || *cursor->at != ':') return 0;
    cursor->at++;
    skip_whitespace(cursor);
    return 1;
}

static int key_is(const unsigned char *key, Py_ssize_t length, const char *name) {
    return (size_t)length == strlen(name) && memcmp(key, name, (size_t)length) == 0;
}

/* An args value as a column reads it: ARG_*, and *number for ARG_INT and ARG_BOOL. A float
 * of COLUMN_LIMIT or more (or one not read here) is ARG_ABOVE too: Python refuses it. */
static int arg_type(const Value *value, long long *number) {
    if (value->type == V_TRUE || value->type == V_FALSE) {
        *number = value->type == V_TRUE;
        return ARG_BOOL;
    }
    if (value->type == V_FLOAT) {
        double real;
        return !number_as_double(&value->number, &real) || real >= COLUMN_LIMIT ? ARG_ABOVE
                                                                                : ARG_OTHER;
    }
    if (value->type != V_INTEGER) return ARG_OTHER;
    if (number_as_integer(&value->number, number)) return ARG_INT;
    return value->number.negative ? ARG_BELOW : ARG_ABOVE;
}

/* The args object at the cursor: correlation and bytes kept, the rest skipped. 1 when valid
 * and plain (no escaped key, no key twice). */
static int read_args(Cursor *cursor, const unsigned char *base, Record *record) {
    Value correlation = {V_ABSENT, {0, 0}, {0}}, size = {V_ABSENT, {0, 0}, {0}};
    int seen_correlation = 0, seen_size = 0;
    cursor->at++;
    skip_whitespace(cursor);
    if (cursor->at < cursor->end && *cursor->at == '}') {
        cursor->at++;
    } else {
        for (;;) {
            const unsigned char *key;
            Py_ssize_t length;
            if (!read_key(cursor, &key, &length) || key == NULL) return 0;
            if (key_is(key, length, "correlation")) {
                if (seen_correlation++ || !read_value(cursor, base, &correlation)) return 0;
            } else if (key_is(key, length, "bytes")) {
                if (seen_size++ || !read_value(cursor, base, &size)) return 0;
            } else if (!skip_value(cursor, 2)) {
                return 0;
            }
            skip_whitespace(cursor);
            if (cursor->at >= cursor->end) return 0;
            if (*cursor->at == ',') {
                cursor->at++;
                skip_whitespace(cursor);
                continue;
            }
            if (*cursor->at != '}') return 0;
            cursor->at++;
            break;
        }
    }
    record->has_args = 1;
    record->correlation_type = (unsigned char)arg_type(&correlation, &record->correlation);
    record->size_type = (unsigned char)arg_type(&size, &record->size);
    return 1;
}

enum { F_TEXT_PH, F_TEXT_CAT, F_TEXT_NAME, F_TEXT_PID, F_TEXT_TID, F_TEXT_TS, F_TEXT_DUR,
       TEXT_FIELDS };

/* Which field of a LinkEvent a key names (F_TEXT_*), or -1 (args and the rest). */
static inline int field_of_key(const unsigned char *key, Py_ssize_t length) {
    switch (length) {
    case 2:
        if (key[0] == 'p' && key[1] == 'h') return F_TEXT_PH;
        if (key[0] == 't' && key[1] == 's') return F_TEXT_TS;
        return -1;
    case 3:
        if (memcmp(key, "cat", 3) == 0) return F_TEXT_CAT;
        if (memcmp(key, "pid", 3) == 0) return F_TEXT_PID;
        if (memcmp(key, "tid", 3) == 0) return F_TEXT_TID;
        if (memcmp(key, "dur", 3) == 0) return F_TEXT_DUR;
        return -1;
    case 4:
        return memcmp(key, "name", 4) == 0 ? F_TEXT_NAME : -1;
    default:
        return -1;
    }
}

/* A timestamp or duration the C fold takes (plain_number in _fold.c): 1 and *number set. */
static int plain_value(const Value *value, double *number, int *is_int) {
    if (value->type == V_FLOAT) {
        *is_int = 0;
        return number_as_double(&value->number, number);
    }
    if (value->type != V_INTEGER) return 0;
    long long integer;
    if (!number_as_integer(&value->number, &integer) || integer > EXACT_INTEGER_LIMIT ||
        integer < -EXACT_INTEGER_LIMIT)
        return 0;
    *is_int = 1;
    *number = (double)integer;
    return 1;
}

/* Times the C fold takes: within +-2^53 us (285 years), and a duration not negative (Python
 * refuses NaN, infinity and what lies beyond, TIME_LIMIT_US in _collector.py, and leaves out a
 * negative duration with a warning). The comparisons are false for NaN. */
static int usable_times(double timestamp, double duration) {
    const double limit = (double)EXACT_INTEGER_LIMIT;
    return timestamp >= -limit && timestamp <= limit && duration >= 0 && duration <= limit;
}

/* A pid or tid the record can name: a plain string, an int64, or absent. */
static int plain_thread_part(const Value *value) {
    long long integer;
    return value->type == V_ABSENT || value->type == V_STRING ||
           (value->type == V_INTEGER && number_as_integer(&value->number, &integer));
}

/* Decide what the fold does with an event (fold_event in _fold.c, read from the text). */
static void classify(Record *record, const unsigned char *base, const Value *fields) {
    const Value *phase = &fields[F_TEXT_PH];
    record->action = R_PYTHON;
    if (phase->type != V_STRING) return;
    record->phase = phase->span;
    if (!span_equals(base, phase->span, "\"X\"")) {
        if (!span_equals(base, phase->span, "\"B\"") &&
            !span_equals(base, phase->span, "\"E\"") && !span_equals(base, phase->span, "\"M\""))
            record->action = R_COUNT;
        return;
    }
    if (fields[F_TEXT_CAT].type != V_STRING || fields[F_TEXT_NAME].type != V_STRING) return;
    int kind = kind_of_text(base, fields[F_TEXT_CAT].span), duration_is_int, timestamp_is_int;
    if (kind == KIND_OTHER ||
        !plain_value(&fields[F_TEXT_TS], &record->timestamp, &timestamp_is_int) ||
        !plain_value(&fields[F_TEXT_DUR], &record->duration, &duration_is_int) ||
        !usable_times(record->timestamp, record->duration))
        return;
    if ((kind == KIND_GPU || kind == KIND_RUNTIME) &&
        (!plain_thread_part(&fields[F_TEXT_PID]) || !plain_thread_part(&fields[F_TEXT_TID])))
        return;
    if (record->has_args && (kind == KIND_RUNTIME || kind == KIND_GPU)) {
        /* too large for the column: Python raises, so Python folds it */
        if (record->correlation_type == ARG_ABOVE ||
            (record->correlation_type == ARG_BELOW && kind == KIND_RUNTIME))
            return;
        if (kind == KIND_GPU && record->size_type == ARG_ABOVE) return;
    }
    record->action = R_COMPLETE;
    record->kind = (unsigned char)kind;
    record->dur_is_int = (unsigned char)duration_is_int;
    record->name = fields[F_TEXT_NAME].span;
    record->pid = fields[F_TEXT_PID].span;
    record->tid = fields[F_TEXT_TID].span;
}

/* Read one event object at the cursor into ``record``; 1 when valid and plain. */
static int read_event(Cursor *cursor, const unsigned char *base, Record *record) {
    Value fields[TEXT_FIELDS];
    for (int index = 0; index < TEXT_FIELDS; index++) {
        fields[index].type = V_ABSENT;
        fields[index].span.start = fields[index].span.length = 0;
    }
    int seen = 0, seen_args = 0;
    record->has_args = 0;
    if (cursor->at >= cursor->end || *cursor->at != '{') return 0;
    cursor->at++;
    skip_whitespace(cursor);
    if (cursor->at < cursor->end && *cursor->at == '}') {
        cursor->at++;
    } else {
        for (;;) {
            const unsigned char *key;
            Py_ssize_t length;
            if (!read_key(cursor, &key, &length) || key == NULL) return 0;
            int field = field_of_key(key, length);
            if (field >= 0) {
                if (seen & (1 << field)) return 0;
                seen |= 1 << field;
                if (!read_value(cursor, base, &fields[field])) return 0;
            } else if (key_is(key, length, "args")) {
                if (seen_args++ || cursor->at >= cursor->end) return 0;
                if (*cursor->at == '{') {
                    if (!read_args(cursor, base, record)) return 0;
                } else if (!read_literal(cursor, "null", 4)) {
                    return 0; /* args of another type: the struct decoder refuses the batch */
                }
            } else if (!skip_value(cursor, 1)) {
                return 0;
            }
            skip_whitespace(cursor);
            if (cursor->at >= cursor->end) return 0;
            if (*cursor->at == ',') {
                cursor->at++;
                skip_whitespace(cursor);
                continue;
            }
            if (*cursor->at != '}') return 0;
            cursor->at++;
            break;
        }
    }
    classify(record, base, fields);
    return 1;
}

PyDoc_STRVAR(parse_events_doc,
             "parse_events(text, decode)\n--\n\n"
             "Read the JSON array of events in text (bytes) for Folder.fold: an EventText, or "
             "None when the text must be decoded the general way. decode(bytes) decodes a JSON "
             "array of the events the C fold leaves to Python (None when it cannot).");

static PyObject *parse_events(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *text, *decode;
    if (!PyArg_ParseTuple(args, "O!O", &PyBytes_Type, &text, &decode)) return NULL;
    const unsigned char *base = (const unsigned char *)PyBytes_AS_STRING(text);
    Cursor cursor = {base, base + PyBytes_GET_SIZE(text)};
    Py_ssize_t capacity = 1024, count = 0;
    Record *records = PyMem_Malloc((size_t)capacity * sizeof(Record));
    Buffer others = {NULL, 0, 0}; /* the R_PYTHON events' text, as one JSON array */
    Py_ssize_t python_count = 0;
    PyObject *result = NULL;
    if (records == NULL) return PyErr_NoMemory();
    skip_whitespace(&cursor);
    if (cursor.at >= cursor.end || *cursor.at != '[') goto unusual;
    cursor.at++;
    skip_whitespace(&cursor);
    if (cursor.at < cursor.end && *cursor.at == ']') {
        cursor.at++;
    } else {
        for (;;) {
            if (count == capacity) {
                capacity *= 2;
                Record *grown = PyMem_Realloc(records, (size_t)capacity * sizeof(Record));
                if (grown == NULL) {
                    PyErr_NoMemory();
                    goto done;
                }
                records = grown;
            }
            Record *record = &records[count];
            const unsigned char *start = cursor.at;
            if (!read_event(&cursor, base, record)) goto unusual;
            if (record->action == R_PYTHON) {
                record->python_index = python_count++;
                if (buffer_put(&others, python_count == 1 ? "[" : ",", 1) < 0 ||
                    buffer_put(&others, start, cursor.at - start) < 0)
                    goto done;
            }
            count++;
            skip_whitespace(&cursor);
            if (cursor.at >= cursor.end) goto unusual;
            if (*cursor.at == ',') {
                cursor.at++;
                skip_whitespace(&cursor);
                continue;
            }
            if (*cursor.at != ']') goto unusual;
            cursor.at++;
            break;
        }
    }
    skip_whitespace(&cursor);
    if (cursor.at != cursor.end) goto unusual;
    PyObject *python_events;
    if (python_count) {
        if (buffer_put(&others, "]", 1) < 0) goto done;
        PyObject *array = PyBytes_FromStringAndSize(others.data, others.size);
        if (array == NULL) goto done;
        python_events = PyObject_CallOneArg(decode, array);
        Py_DECREF(array);
        if (python_events == NULL) goto done;
        if (!PyList_CheckExact(python_events) || PyList_GET_SIZE(python_events) != python_count) {
            Py_DECREF(python_events);
            goto unusual;
        }
        /* a list of its own: the fold indexes it by python_index, and the decoder may keep the
         * list it returned and change it afterwards */
        PyObject *own = PyList_GetSlice(python_events, 0, python_count);
        Py_DECREF(python_events);
        if ((python_events = own) == NULL) goto done;
    } else if ((python_events = PyList_New(0)) == NULL) {
        goto done;
    }
    EventText *batch = PyObject_GC_New(EventText, &EventTextType);
    if (batch == NULL) {
        Py_DECREF(python_events);
        goto done;
    }
    batch->text = Py_NewRef(text);
    batch->python_events = python_events;
    batch->records = records;
    batch->count = count;
    records = NULL;
    PyObject_GC_Track(batch);
    result = (PyObject *)batch;
    goto done;
unusual:
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(records);
    PyMem_Free(others.data);
    return result;
}

PyDoc_STRVAR(object_members_doc,
             "object_members(text, start, end)\n--\n\n"
             "The members of the JSON object text[start:end] (its '{' to its '}'): a list of "
             "(key_start, key_end, value_start, value_end) offsets into text, the key with its "
             "quotes; None when the text is not one strictly valid object (the general decoder "
             "then reads it and says what is wrong). For a trace's header, whose values may be "
             "too large to decode into Python objects (see _scanner.py).");

static PyObject *object_members(PyObject *Py_UNUSED(module), PyObject *args) {
    Py_buffer view;
    Py_ssize_t start, end;
    if (!PyArg_ParseTuple(args, "y*nn", &view, &start, &end)) return NULL;
    PyObject *members = NULL;
    if (start < 0 || end > view.len || start >= end) goto unusual;
    const unsigned char *base = (const unsigned char *)view.buf;
    Cursor cursor = {base + start, base + end};
    if (*cursor.at != '{') goto unusual;
    members = PyList_New(0);
    if (members == NULL) goto done;
    cursor.at++;
    skip_whitespace(&cursor);
    if (cursor.at < cursor.end && *cursor.at == '}') {
        cursor.at++;
    } else {
        for (;;) {
            int escaped;
            const unsigned char *key = cursor.at;
            if (cursor.at >= cursor.end || *cursor.at != '"' || !read_string(&cursor, &escaped))
                goto unusual;
            const unsigned char *key_end = cursor.at;
            skip_whitespace(&cursor);
            if (cursor.at >= cursor.end || *cursor.at != ':') goto unusual;
            cursor.at++;
            skip_whitespace(&cursor);
            const unsigned char *value = cursor.at;
            if (!skip_value(&cursor, 1)) goto unusual;
            PyObject *member = Py_BuildValue("(nnnn)", (Py_ssize_t)(key - base),
                                             (Py_ssize_t)(key_end - base),
                                             (Py_ssize_t)(value - base),
                                             (Py_ssize_t)(cursor.at - base));
            if (member == NULL || PyList_Append(members, member) < 0) {
                Py_XDECREF(member);
                Py_CLEAR(members);
                goto done;
            }
            Py_DECREF(member);
            skip_whitespace(&cursor);
            if (cursor.at < cursor.end && *cursor.at == ',') {
                cursor.at++;
                skip_whitespace(&cursor);
                continue;
            }
            if (cursor.at < cursor.end && *cursor.at == '}') {
                cursor.at++;
                break;
            }
            goto unusual;
        }
    }
    skip_whitespace(&cursor);
    if (cursor.at != cursor.end) goto unusual;
    goto done;
unusual:
    Py_XDECREF(members);
    members = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&view);
    return members;
}
