/*
 * ncompass NVTX recorder: a small NVTX v3 injection library.
 *
 * Loaded by the NVTX loader of any library in the process (the `nvtx` Python package, torch,
 * CUDA libraries) when NVTX_INJECTION64_PATH names this file, the same way Nsight Systems
 * attaches. It records every push/pop, start/end and mark, registered strings, domain and
 * category names and OS thread names, and writes them when the process exits.
 *
 * Environment:
 *   NCOMPASS_NVTX_OUTPUT      path of the output file; "%p" in it is replaced by the process id,
 *                             so several processes (fork, multiprocessing) never share a file.
 *   NCOMPASS_NVTX_MAX_EVENTS  events kept per process (default 8,000,000); later events are
 *                             counted as dropped.
 *   NCOMPASS_NVTX_WINDOWS     set (to anything): record only inside recording windows, which
 *                             ncompass_nvtx_recorder_window() opens and closes (see below).
 *
 * Recording windows: with NCOMPASS_NVTX_WINDOWS set the recorder starts closed and keeps
 * nothing until ncompass_nvtx_recorder_window(N) (N > 0) opens window N; (0) closes it. The
 * caller (ncompass.capture.nvtx_windows, through ctypes) loads this same file, so it flips the
 * flag every NVTX copy of the process reports to. Outside a window an event costs a relaxed
 * load of the flag (and, for push/pop, a depth count), no clock read and no memory. Only
 * ranges that start inside a window are recorded: the pop or end of a range begun outside the
 * current window is not kept either, so a range still open when its window closes has no end
 * in the recording (the reader ends it at the window's close). Per thread and domain the
 * recorder tracks the depth from which the current window's pushes start; an event budget
 * still applies. Forked children start closed.
 *
 * Cost per event: one clock_gettime(CLOCK_MONOTONIC) (vDSO, no system call) and one store into
 * a buffer owned by the calling thread; no lock, and an allocation only when the thread's
 * current chunk is full (chunks grow from 64 to 8192 events).
 *
 * Output: JSON lines, written to "<path>.tmp" and renamed, so a reader never sees half a file.
 *   {"type":"header", ...}                          process id, clock, counts
 *   {"type":"domain","id":1,"name":"ncompass"}      id 0 is the default (unnamed) domain
 *   {"type":"string","id":3,"domain":1,"text":"x"}  registered strings
 *   {"type":"category","domain":1,"id":2,"name":"y"}
 *   {"type":"thread","tid":123,"os_name":"python","name":"worker"}
 *   {"e":"push","tid":123,"t":ns,"d":1,"s":3,"c":4278255360,"cat":2,"p":7}   one per event
 * Event kinds: push, pop, start (with "id"), end (with "id"), mark. The message is "s" (a
 * registered string id) or "m" (copied text); "c" (ARGB colour), "cat" and "p" (payload) only
 * appear when set.
 *
 * The NVTX ABI declarations below are written from the public NVTX v3 headers' documented
 * layout (nvToolsExt.h, nvtxDetail/nvtxTypes.h).
 */

#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>

#define NR_EXPORT __attribute__((visibility("default")))

/* ---------------------------------------------------------------- NVTX ABI (v3) */

typedef uint64_t nvtx_range_id;
typedef void* nvtx_domain_handle;
typedef void* nvtx_string_handle;
typedef void (*nvtx_function_pointer)(void);

enum { NVTX_COLOR_ARGB = 1 };
enum {
    NVTX_MESSAGE_ASCII = 1,
    NVTX_MESSAGE_UNICODE = 2,
    NVTX_MESSAGE_REGISTERED = 3,
};
enum {
    NVTX_PAYLOAD_U64 = 1,
    NVTX_PAYLOAD_I64 = 2,
    NVTX_PAYLOAD_DOUBLE = 3,
    NVTX_PAYLOAD_U32 = 4,
    NVTX_PAYLOAD_I32 = 5,
    NVTX_PAYLOAD_FLOAT = 6,
};

typedef struct {
    uint16_t version;
    uint16_t size;
    uint32_t category;
    int32_t color_type;
    uint32_t color;
    int32_t payload_type;
    int32_t reserved0;
    union {
        uint64_t u64;
        int64_t i64;
        double f64;
        uint32_t u32;
        int32_t i32;
        float f32;
    } payload;
    int32_t message_type;
    union {
        const char* ascii;
        const wchar_t* unicode;
        nvtx_string_handle registered;
    } message;
} nvtx_event_attributes;

enum { NVTX_ETID_CALLBACKS = 1 };
enum { NVTX_MODULE_CORE = 1, NVTX_MODULE_CORE2 = 5 };

/* Callback ids of the CORE module. */
enum {
    CORE_MarkEx = 1,
    CORE_MarkA = 2,
    CORE_MarkW = 3,
    CORE_RangeStartEx = 4,
    CORE_RangeStartA = 5,
    CORE_RangeStartW = 6,
    CORE_RangeEnd = 7,
    CORE_RangePushEx = 8,
    CORE_RangePushA = 9,
    CORE_RangePushW = 10,
    CORE_RangePop = 11,
    CORE_NameCategoryA = 12,
    CORE_NameCategoryW = 13,
    CORE_NameOsThreadA = 14,
    CORE_NameOsThreadW = 15,
};

/* Callback ids of the CORE2 (domain) module. */
enum {
    CORE2_DomainMarkEx = 1,
    CORE2_DomainRangeStartEx = 2,
    CORE2_DomainRangeEnd = 3,
    CORE2_DomainRangePushEx = 4,
    CORE2_DomainRangePop = 5,
    CORE2_DomainResourceCreate = 6,
    CORE2_DomainResourceDestroy = 7,
    CORE2_DomainNameCategoryA = 8,
    CORE2_DomainNameCategoryW = 9,
    CORE2_DomainRegisterStringA = 10,
    CORE2_DomainRegisterStringW = 11,
    CORE2_DomainCreateA = 12,
    CORE2_DomainCreateW = 13,
    CORE2_DomainDestroy = 14,
    CORE2_Initialize = 15,
};

typedef nvtx_function_pointer** nvtx_function_table;
typedef struct {
    size_t struct_size;
    int (*get_module_function_table)(int module, nvtx_function_table* table, unsigned int* size);
} nvtx_callbacks_export_table;
typedef const void* (*nvtx_get_export_table)(uint32_t table_id);

/* ---------------------------------------------------------------- recorder state */

enum { EV_PUSH = 1, EV_POP, EV_START, EV_END, EV_MARK };
enum { F_COLOR = 1, F_CATEGORY = 2, F_REGISTERED = 4 };

/* A thread's first chunk is small (programs may start thousands of short-lived threads);
 * each next chunk doubles, up to NR_CHUNK_MAX_EVENTS. */
#define NR_CHUNK_MIN_EVENTS 64
#define NR_CHUNK_MAX_EVENTS 8192
#define NR_ARENA_BYTES 65536
#define NR_DEPTH_SLOTS 64
#define NR_DEFAULT_MAX_EVENTS 8000000ULL

struct nr_string { /* a registered string; its address is the NVTX string handle */
    struct nr_string* next;
    uint32_t id;
    uint32_t domain_id;
    char text[];
};

struct nr_domain { /* a created domain; its address is the NVTX domain handle */
    struct nr_domain* next;
    uint32_t id;
    char name[];
};

struct nr_category {
    struct nr_category* next;
    uint32_t domain_id;
    uint32_t id;
    char name[];
};

struct nr_thread_name {
    struct nr_thread_name* next;
    uint32_t tid;
    char name[];
};

struct nr_event {
    uint64_t time_ns;
    uint64_t range_id;       /* start/end */
    const void* message;     /* struct nr_string* when F_REGISTERED, else copied text or NULL */
    uint64_t payload;        /* raw bits, interpreted by payload_type */
    uint32_t color;
    uint32_t category;
    uint32_t domain_id;
    uint8_t kind;
    uint8_t flags;
    uint8_t payload_type;
    uint8_t unused;
};

struct nr_chunk {
    struct nr_chunk* next;
    uint32_t count; /* published with release stores; the exit writer reads with acquire */
    uint32_t capacity;
    struct nr_event events[];
};

struct nr_thread {
    struct nr_thread* next;
    uint32_t tid;
    char os_name[16];
    struct nr_chunk* first;
    struct nr_chunk* last;
    char* arena;
    size_t arena_left;
    uint64_t dropped;
    int depth[NR_DEPTH_SLOTS]; /* push/pop nesting per domain (ids >= 64 share the last slot) */
    /* Windows: levels >= window_base[d] of domain d's stack were pushed in window_of[d]. */
    int window_base[NR_DEPTH_SLOTS];
    uint32_t window_of[NR_DEPTH_SLOTS];
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER; /* guards the metadata lists */
static struct nr_thread* g_threads;                       /* pushed with compare-and-swap */
static struct nr_string* g_strings;
static struct nr_domain* g_domains;
static struct nr_category* g_categories;
static struct nr_thread_name* g_thread_names;
static uint32_t g_next_string_id = 1;
static uint32_t g_next_domain_id = 1;
static uint64_t g_next_range_id = 1;
static uint64_t g_events_left; /* the event budget, taken a chunk at a time */
static int g_written;
static char g_output_template[4096];
static int g_windowed;               /* NCOMPASS_NVTX_WINDOWS: record inside windows only */
static uint32_t g_window;            /* the open window's number; 0: none is open */
static uint64_t g_window_first_range_id; /* the first start/end id issued in the open window */

static __thread struct nr_thread* t_thread;

static inline uint64_t nr_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static struct nr_thread* nr_thread_create(void) {
    struct nr_thread* thread = calloc(1, sizeof(*thread));
    if (!thread) return NULL;
    thread->tid = (uint32_t)syscall(SYS_gettid);
    prctl(PR_GET_NAME, thread->os_name, 0, 0, 0);
    thread->os_name[15] = '\0';
    struct nr_thread* head = __atomic_load_n(&g_threads, __ATOMIC_ACQUIRE);
    do {
        thread->next = head;
    } while (!__atomic_compare_exchange_n(&g_threads, &head, thread, 1, __ATOMIC_RELEASE,
                                          __ATOMIC_ACQUIRE));
    return thread;
}

static inline struct nr_thread* nr_current_thread(void) {
    struct nr_thread* thread = t_thread;
    if (__builtin_expect(thread == NULL, 0)) thread = t_thread = nr_thread_create();
    return thread;
}

/* Returns a slot for one more event of this thread, or NULL when the budget is spent. */
static struct nr_event* nr_next_event(struct nr_thread* thread) {
    struct nr_chunk* chunk = thread->last;
    if (__builtin_expect(chunk != NULL && chunk->count < chunk->capacity, 1))
        return &chunk->events[chunk->count];
    if (__atomic_load_n(&g_written, __ATOMIC_ACQUIRE)) return NULL;
    uint64_t capacity = chunk ? (uint64_t)chunk->capacity * 2 : NR_CHUNK_MIN_EVENTS;
    if (capacity > NR_CHUNK_MAX_EVENTS) capacity = NR_CHUNK_MAX_EVENTS;
    uint64_t left = __atomic_load_n(&g_events_left, __ATOMIC_RELAXED);
    uint64_t granted;
    do {
        granted = left < capacity ? left : capacity;
        if (granted == 0) {
            thread->dropped++;
            return NULL;
        }
    } while (!__atomic_compare_exchange_n(&g_events_left, &left, left - granted, 1,
                                          __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    struct nr_chunk* fresh = malloc(sizeof(*fresh) + granted * sizeof(struct nr_event));
    if (!fresh) {
        thread->dropped++;
        return NULL;
    }
    fresh->next = NULL;
    fresh->count = 0;
    fresh->capacity = (uint32_t)granted;
    if (chunk)
        __atomic_store_n(&chunk->next, fresh, __ATOMIC_RELEASE);
    else
        __atomic_store_n(&thread->first, fresh, __ATOMIC_RELEASE);
    thread->last = fresh;
    return &fresh->events[0];
}

static inline void nr_publish(struct nr_thread* thread) {
    struct nr_chunk* chunk = thread->last;
    __atomic_store_n(&chunk->count, chunk->count + 1, __ATOMIC_RELEASE);
}

/* Copies a transient message into this thread's arena (only for unregistered messages). */
static const char* nr_copy_text(struct nr_thread* thread, const char* text) {
    size_t size = strlen(text) + 1;
    if (size > NR_ARENA_BYTES / 4) {
        char* own = malloc(size);
        if (own) memcpy(own, text, size);
        return own;
    }
    if (thread->arena_left < size) {
        thread->arena = malloc(NR_ARENA_BYTES);
        thread->arena_left = thread->arena ? NR_ARENA_BYTES : 0;
        if (!thread->arena) return NULL;
    }
    char* copy = thread->arena;
    memcpy(copy, text, size);
    thread->arena += size;
    thread->arena_left -= size;
    return copy;
}

/* wchar_t (UTF-32 on Linux) to a malloc'ed UTF-8 string. */
static char* nr_utf8_from_wide(const wchar_t* wide) {
    if (!wide) return NULL;
    size_t length = wcslen(wide);
    char* out = malloc(length * 4 + 1);
    if (!out) return NULL;
    char* cursor = out;
    for (size_t i = 0; i < length; i++) {
        uint32_t c = (uint32_t)wide[i];
        if (c < 0x80) {
            *cursor++ = (char)c;
        } else if (c < 0x800) {
            *cursor++ = (char)(0xC0 | (c >> 6));
            *cursor++ = (char)(0x80 | (c & 0x3F));
        } else if (c < 0x10000) {
            *cursor++ = (char)(0xE0 | (c >> 12));
            *cursor++ = (char)(0x80 | ((c >> 6) & 0x3F));
            *cursor++ = (char)(0x80 | (c & 0x3F));
        } else {
            *cursor++ = (char)(0xF0 | ((c >> 18) & 0x07));
            *cursor++ = (char)(0x80 | ((c >> 12) & 0x3F));
            *cursor++ = (char)(0x80 | ((c >> 6) & 0x3F));
            *cursor++ = (char)(0x80 | (c & 0x3F));
        }
    }
    *cursor = '\0';
    return out;
}

static inline uint32_t nr_domain_id(nvtx_domain_handle domain) {
    return domain ? ((struct nr_domain*)domain)->id : 0;
}

static inline int* nr_depth(struct nr_thread* thread, uint32_t domain_id) {
    return &thread->depth[domain_id < NR_DEPTH_SLOTS ? domain_id : NR_DEPTH_SLOTS - 1];
}

/* Fills an event from NVTX event attributes (message, colour, category, payload). */
static void nr_fill_attributes(struct nr_thread* thread, struct nr_event* event,
                               const nvtx_event_attributes* attributes) {
    event->message = NULL;
    event->flags = 0;
    event->payload_type = 0;
    if (!attributes) return;
    if (attributes->color_type == NVTX_COLOR_ARGB) {
        event->flags |= F_COLOR;
        event->color = attributes->color;
    }
    if (attributes->category) {
        event->flags |= F_CATEGORY;
        event->category = attributes->category;
    }
    switch (attributes->payload_type) {
        case NVTX_PAYLOAD_U64:
        case NVTX_PAYLOAD_I64:
        case NVTX_PAYLOAD_DOUBLE:
            event->payload_type = (uint8_t)attributes->payload_type;
            event->payload = attributes->payload.u64;
            break;
        case NVTX_PAYLOAD_U32:
            event->payload_type = NVTX_PAYLOAD_U64;
            event->payload = attributes->payload.u32;
            break;
        case NVTX_PAYLOAD_I32:
            event->payload_type = NVTX_PAYLOAD_I64;
            event->payload = (uint64_t)(int64_t)attributes->payload.i32;
            break;
        case NVTX_PAYLOAD_FLOAT: {
            double value = attributes->payload.f32;
            event->payload_type = NVTX_PAYLOAD_DOUBLE;
            memcpy(&event->payload, &value, sizeof(value));
            break;
        }
        default:
            break;
    }
    switch (attributes->message_type) {
        case NVTX_MESSAGE_REGISTERED:
            if (attributes->message.registered) {
                event->flags |= F_REGISTERED;
                event->message = attributes->message.registered;
            }
            break;
        case NVTX_MESSAGE_ASCII:
            if (attributes->message.ascii)
                event->message = nr_copy_text(thread, attributes->message.ascii);
            break;
        case NVTX_MESSAGE_UNICODE: {
            char* text = nr_utf8_from_wide(attributes->message.unicode);
            if (text) {
                event->message = nr_copy_text(thread, text);
                free(text);
            }
            break;
        }
        default:
            break;
    }
}

static void nr_record(uint8_t kind, uint32_t domain_id, uint64_t range_id,
                      const nvtx_event_attributes* attributes, const char* text) {
    uint64_t now = nr_now_ns();
    struct nr_thread* thread = nr_current_thread();
    if (!thread) return;
    struct nr_event* event = nr_next_event(thread);
    if (!event) return;
    event->time_ns = now;
    event->kind = kind;
    event->domain_id = domain_id;
    event->range_id = range_id;
    nr_fill_attributes(thread, event, attributes);
    if (text) event->message = nr_copy_text(thread, text);
    nr_publish(thread);
}

/* ---------------------------------------------------------------- NVTX callbacks */

/* The open window (0: none); with windows off, always recording (window "1"). */
static inline uint32_t nr_window(void) {
    return g_windowed ? __atomic_load_n(&g_window, __ATOMIC_RELAXED) : 1;
}

static int nr_push(uint32_t domain_id, const nvtx_event_attributes* attributes, const char* text) {
    uint32_t window = nr_window();
    struct nr_thread* thread = t_thread;
    if (window) {
        nr_record(EV_PUSH, domain_id, 0, attributes, text);
        thread = t_thread;
    } else if (!thread) {
        thread = t_thread = nr_thread_create(); /* depths are counted outside windows too */
    }
    if (!thread) return 0;
    int slot = domain_id < NR_DEPTH_SLOTS ? (int)domain_id : NR_DEPTH_SLOTS - 1;
    int depth = thread->depth[slot]++;
    if (window && thread->window_of[slot] != window) { /* the window's first push here */
        thread->window_of[slot] = window;
        thread->window_base[slot] = depth;
    }
    return depth;
}

static int nr_pop(uint32_t domain_id) {
    struct nr_thread* thread = t_thread;
    int slot = domain_id < NR_DEPTH_SLOTS ? (int)domain_id : NR_DEPTH_SLOTS - 1;
    uint32_t window = nr_window();
    int level = thread ? thread->depth[slot] - 1 : -1;
    /* Kept only when its push was kept in this same window (or with windows off). */
    if (!g_windowed || (window && thread && thread->window_of[slot] == window &&
                        level >= thread->window_base[slot]))
        nr_record(EV_POP, domain_id, 0, NULL, NULL);
    else if (thread && window && thread->window_of[slot] == window &&
             level >= 0 && level < thread->window_base[slot])
        thread->window_base[slot] = level; /* popped below the window's pushes: they start here */
    if (!thread) return -1;
    int* depth = nr_depth(thread, domain_id);
    if (*depth <= 0) return -1;
    return --(*depth);
}

static nvtx_range_id nr_start(uint32_t domain_id, const nvtx_event_attributes* attributes,
                              const char* text) {
    nvtx_range_id id = __atomic_fetch_add(&g_next_range_id, 1, __ATOMIC_RELAXED);
    if (nr_window()) nr_record(EV_START, domain_id, id, attributes, text);
    return id;
}

/* An end is kept when its range started in the open window (ids grow with time). */
static void nr_end(uint32_t domain_id, nvtx_range_id id) {
    if (!g_windowed ||
        (nr_window() && id >= __atomic_load_n(&g_window_first_range_id, __ATOMIC_RELAXED)))
        nr_record(EV_END, domain_id, id, NULL, NULL);
}

/* Opens recording window `number` (> 0) or closes the open one (0); returns the previous
 * window's number. Called by ncompass through ctypes, on the thread that opens the window. */
NR_EXPORT uint32_t ncompass_nvtx_recorder_window(uint32_t number) {
    if (number)
        __atomic_store_n(&g_window_first_range_id,
                         __atomic_load_n(&g_next_range_id, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
    return __atomic_exchange_n(&g_window, number, __ATOMIC_RELEASE);
}

/* Events kept so far in this process (the recorder's own count, for tests and benchmarks). */
NR_EXPORT uint64_t ncompass_nvtx_recorder_events(void) {
    uint64_t events = 0;
    for (struct nr_thread* t = __atomic_load_n(&g_threads, __ATOMIC_ACQUIRE); t; t = t->next)
        for (struct nr_chunk* c = __atomic_load_n(&t->first, __ATOMIC_ACQUIRE); c;
             c = __atomic_load_n(&c->next, __ATOMIC_ACQUIRE))
            events += __atomic_load_n(&c->count, __ATOMIC_ACQUIRE);
    return events;
}

static void MarkEx(const nvtx_event_attributes* a) { nr_record(EV_MARK, 0, 0, a, NULL); }
static void MarkA(const char* m) { nr_record(EV_MARK, 0, 0, NULL, m); }
static void MarkW(const wchar_t* m) {
    char* text = nr_utf8_from_wide(m);
    nr_record(EV_MARK, 0, 0, NULL, text);
    free(text);
}
static nvtx_range_id RangeStartEx(const nvtx_event_attributes* a) { return nr_start(0, a, NULL); }
static nvtx_range_id RangeStartA(const char* m) { return nr_start(0, NULL, m); }
static nvtx_range_id RangeStartW(const wchar_t* m) {
    char* text = nr_utf8_from_wide(m);
    nvtx_range_id id = nr_start(0, NULL, text);
    free(text);
    return id;
}
static void RangeEnd(nvtx_range_id id) { nr_end(0, id); }
static int RangePushEx(const nvtx_event_attributes* a) { return nr_push(0, a, NULL); }
static int RangePushA(const char* m) { return nr_push(0, NULL, m); }
static int RangePushW(const wchar_t* m) {
    char* text = nr_utf8_from_wide(m);
    int depth = nr_push(0, NULL, text);
    free(text);
    return depth;
}
static int RangePop(void) { return nr_pop(0); }

static void nr_name_category(uint32_t domain_id, uint32_t category, const char* name) {
    if (!name) return;
    size_t size = strlen(name) + 1;
    struct nr_category* entry = malloc(sizeof(*entry) + size);
    if (!entry) return;
    entry->domain_id = domain_id;
    entry->id = category;
    memcpy(entry->name, name, size);
    pthread_mutex_lock(&g_lock);
    entry->next = g_categories;
    g_categories = entry;
    pthread_mutex_unlock(&g_lock);
}

static void NameCategoryA(uint32_t category, const char* name) {
    nr_name_category(0, category, name);
}
static void NameCategoryW(uint32_t category, const wchar_t* name) {
    char* text = nr_utf8_from_wide(name);
    nr_name_category(0, category, text);
    free(text);
}

static void NameOsThreadA(uint32_t tid, const char* name) {
    if (!name) return;
    size_t size = strlen(name) + 1;
    struct nr_thread_name* entry = malloc(sizeof(*entry) + size);
    if (!entry) return;
    entry->tid = tid;
    memcpy(entry->name, name, size);
    pthread_mutex_lock(&g_lock);
    entry->next = g_thread_names;
    g_thread_names = entry;
    pthread_mutex_unlock(&g_lock);
}
static void NameOsThreadW(uint32_t tid, const wchar_t* name) {
    char* text = nr_utf8_from_wide(name);
    NameOsThreadA(tid, text);
    free(text);
}

static void DomainMarkEx(nvtx_domain_handle d, const nvtx_event_attributes* a) {
    nr_record(EV_MARK, nr_domain_id(d), 0, a, NULL);
}
static nvtx_range_id DomainRangeStartEx(nvtx_domain_handle d, const nvtx_event_attributes* a) {
    return nr_start(nr_domain_id(d), a, NULL);
}
static void DomainRangeEnd(nvtx_domain_handle d, nvtx_range_id id) {
    nr_end(nr_domain_id(d), id);
}
static int DomainRangePushEx(nvtx_domain_handle d, const nvtx_event_attributes* a) {
    return nr_push(nr_domain_id(d), a, NULL);
}
static int DomainRangePop(nvtx_domain_handle d) { return nr_pop(nr_domain_id(d)); }

/* Resources (named objects such as mutexes) are not recorded; a non-null handle keeps
 * callers that check for failure working. */
static char g_resource_placeholder;
static void* DomainResourceCreate(nvtx_domain_handle d, void* attributes) {
    (void)d;
    (void)attributes;
    return &g_resource_placeholder;
}
static void DomainResourceDestroy(void* resource) { (void)resource; }

static void DomainNameCategoryA(nvtx_domain_handle d, uint32_t category, const char* name) {
    nr_name_category(nr_domain_id(d), category, name);
}
static void DomainNameCategoryW(nvtx_domain_handle d, uint32_t category, const wchar_t* name) {
    char* text = nr_utf8_from_wide(name);
    nr_name_category(nr_domain_id(d), category, text);
    free(text);
}

static nvtx_string_handle DomainRegisterStringA(nvtx_domain_handle d, const char* text) {
    if (!text) return NULL;
    size_t size = strlen(text) + 1;
    struct nr_string* entry = malloc(sizeof(*entry) + size);
    if (!entry) return NULL;
    entry->domain_id = nr_domain_id(d);
    memcpy(entry->text, text, size);
    pthread_mutex_lock(&g_lock);
    entry->id = g_next_string_id++;
    entry->next = g_strings;
    g_strings = entry;
    pthread_mutex_unlock(&g_lock);
    return entry;
}
static nvtx_string_handle DomainRegisterStringW(nvtx_domain_handle d, const wchar_t* text) {
    char* utf8 = nr_utf8_from_wide(text);
    nvtx_string_handle handle = DomainRegisterStringA(d, utf8);
    free(utf8);
    return handle;
}

static nvtx_domain_handle DomainCreateA(const char* name) {
    const char* text = name ? name : "";
    pthread_mutex_lock(&g_lock);
    /* NVTX allows creating a domain twice; hand back the same handle so events group. */
    for (struct nr_domain* d = g_domains; d; d = d->next) {
        if (strcmp(d->name, text) == 0) {
            pthread_mutex_unlock(&g_lock);
            return d;
        }
    }
    size_t size = strlen(text) + 1;
    struct nr_domain* entry = malloc(sizeof(*entry) + size);
    if (entry) {
        entry->id = g_next_domain_id++;
        memcpy(entry->name, text, size);
        entry->next = g_domains;
        g_domains = entry;
    }
    pthread_mutex_unlock(&g_lock);
    return entry;
}
static nvtx_domain_handle DomainCreateW(const wchar_t* name) {
    char* text = nr_utf8_from_wide(name);
    nvtx_domain_handle handle = DomainCreateA(text);
    free(text);
    return handle;
}
/* Events keep pointing at the domain, so a destroyed domain stays allocated. */
static void DomainDestroy(nvtx_domain_handle d) { (void)d; }
static void Initialize(const void* reserved) { (void)reserved; }

/* ---------------------------------------------------------------- output */

static void nr_write_json_string(FILE* out, const char* text) {
    fputc('"', out);
    for (const unsigned char* c = (const unsigned char*)(text ? text : ""); *c; c++) {
        switch (*c) {
            case '"': fputs("\\\"", out); break;
            case '\\': fputs("\\\\", out); break;
            case '\n': fputs("\\n", out); break;
            case '\r': fputs("\\r", out); break;
            case '\t': fputs("\\t", out); break;
            default:
                if (*c < 0x20)
                    fprintf(out, "\\u%04x", *c);
                else
                    fputc(*c, out);
        }
    }
    fputc('"', out);
}

static const char* const nr_kind_names[] = {"", "push", "pop", "start", "end", "mark"};

static void nr_write_event(FILE* out, uint32_t tid, const struct nr_event* event) {
    fprintf(out, "{\"e\":\"%s\",\"tid\":%u,\"t\":%llu,\"d\":%u", nr_kind_names[event->kind], tid,
            (unsigned long long)event->time_ns, event->domain_id);
    if (event->kind == EV_START || event->kind == EV_END)
        fprintf(out, ",\"id\":%llu", (unsigned long long)event->range_id);
    if (event->message) {
        if (event->flags & F_REGISTERED) {
            fprintf(out, ",\"s\":%u", ((const struct nr_string*)event->message)->id);
        } else {
            fputs(",\"m\":", out);
            nr_write_json_string(out, (const char*)event->message);
        }
    }
    if (event->flags & F_COLOR) fprintf(out, ",\"c\":%u", event->color);
    if (event->flags & F_CATEGORY) fprintf(out, ",\"cat\":%u", event->category);
    if (event->payload_type == NVTX_PAYLOAD_U64) {
        fprintf(out, ",\"p\":%llu", (unsigned long long)event->payload);
    } else if (event->payload_type == NVTX_PAYLOAD_I64) {
        fprintf(out, ",\"p\":%lld", (long long)event->payload);
    } else if (event->payload_type == NVTX_PAYLOAD_DOUBLE) {
        double value;
        memcpy(&value, &event->payload, sizeof(value));
        fprintf(out, ",\"p\":%.17g", value);
    }
    fputs("}\n", out);
}

static void nr_output_path(char* path, size_t size) {
    size_t used = 0;
    for (const char* c = g_output_template; *c && used + 32 < size; c++) {
        if (c[0] == '%' && c[1] == 'p') {
            used += (size_t)snprintf(path + used, size - used, "%d", (int)getpid());
            c++;
        } else {
            path[used++] = *c;
        }
    }
    path[used] = '\0';
}

static void nr_write_cmdline(FILE* out) {
    char buffer[1024];
    FILE* in = fopen("/proc/self/cmdline", "rb");
    size_t length = in ? fread(buffer, 1, sizeof(buffer) - 1, in) : 0;
    if (in) fclose(in);
    for (size_t i = 0; i + 1 < length; i++)
        if (buffer[i] == '\0') buffer[i] = ' ';
    buffer[length] = '\0';
    nr_write_json_string(out, buffer);
}

static void nr_write_output(void) {
    if (__atomic_exchange_n(&g_written, 1, __ATOMIC_ACQ_REL)) return;
    if (!g_output_template[0]) return;
    char path[4200], temporary[4300];
    nr_output_path(path, sizeof(path));
    snprintf(temporary, sizeof(temporary), "%s.tmp", path);
    FILE* out = fopen(temporary, "w");
    if (!out) {
        fprintf(stderr, "ncompass nvtx recorder: cannot write %s: %s\n", temporary,
                strerror(errno));
        return;
    }
    static char buffer[1 << 20];
    setvbuf(out, buffer, _IOFBF, sizeof(buffer));

    uint64_t events = 0, dropped = 0;
    struct nr_thread* threads = __atomic_load_n(&g_threads, __ATOMIC_ACQUIRE);
    for (struct nr_thread* t = threads; t; t = t->next) {
        dropped += t->dropped;
        for (struct nr_chunk* c = __atomic_load_n(&t->first, __ATOMIC_ACQUIRE); c;
             c = __atomic_load_n(&c->next, __ATOMIC_ACQUIRE))
            events += __atomic_load_n(&c->count, __ATOMIC_ACQUIRE);
    }
    struct timespec realtime;
    clock_gettime(CLOCK_REALTIME, &realtime);
    fprintf(out,
            "{\"type\":\"header\",\"format\":\"ncompass-nvtx\",\"version\":1,\"pid\":%d,"
            "\"ppid\":%d,\"clock\":\"CLOCK_MONOTONIC\",\"unit\":\"ns\",\"monotonic_ns\":%llu,"
            "\"realtime_ns\":%llu,\"events\":%llu,\"dropped\":%llu,\"cmdline\":",
            (int)getpid(), (int)getppid(), (unsigned long long)nr_now_ns(),
            (unsigned long long)realtime.tv_sec * 1000000000ULL + (unsigned long long)realtime.tv_nsec,
            (unsigned long long)events, (unsigned long long)dropped);
    nr_write_cmdline(out);
    fputs("}\n", out);

    pthread_mutex_lock(&g_lock);
    fputs("{\"type\":\"domain\",\"id\":0,\"name\":\"\"}\n", out);
    for (struct nr_domain* d = g_domains; d; d = d->next) {
        fprintf(out, "{\"type\":\"domain\",\"id\":%u,\"name\":", d->id);
        nr_write_json_string(out, d->name);
        fputs("}\n", out);
    }
    for (struct nr_string* s = g_strings; s; s = s->next) {
        fprintf(out, "{\"type\":\"string\",\"id\":%u,\"domain\":%u,\"text\":", s->id, s->domain_id);
        nr_write_json_string(out, s->text);
        fputs("}\n", out);
    }
    for (struct nr_category* c = g_categories; c; c = c->next) {
        fprintf(out, "{\"type\":\"category\",\"domain\":%u,\"id\":%u,\"name\":", c->domain_id, c->id);
        nr_write_json_string(out, c->name);
        fputs("}\n", out);
    }
    for (struct nr_thread_name* n = g_thread_names; n; n = n->next) {
        fprintf(out, "{\"type\":\"thread_name\",\"tid\":%u,\"name\":", n->tid);
        nr_write_json_string(out, n->name);
        fputs("}\n", out);
    }
    pthread_mutex_unlock(&g_lock);

    for (struct nr_thread* t = threads; t; t = t->next) {
        fprintf(out, "{\"type\":\"thread\",\"tid\":%u,\"os_name\":", t->tid);
        nr_write_json_string(out, t->os_name);
        fprintf(out, ",\"dropped\":%llu}\n", (unsigned long long)t->dropped);
        for (struct nr_chunk* c = __atomic_load_n(&t->first, __ATOMIC_ACQUIRE); c;
             c = __atomic_load_n(&c->next, __ATOMIC_ACQUIRE)) {
            uint32_t count = __atomic_load_n(&c->count, __ATOMIC_ACQUIRE);
            for (uint32_t i = 0; i < count; i++) nr_write_event(out, t->tid, &c->events[i]);
        }
    }
    if (fclose(out) != 0 || rename(temporary, path) != 0)
        fprintf(stderr, "ncompass nvtx recorder: cannot write %s: %s\n", path, strerror(errno));
}

/* Writes this process's recording now (once; later calls and the exit handler do nothing).
 * A multiprocessing child leaves through os._exit, which runs no exit handler: ncompass calls
 * this, through ctypes, when the child's work has returned. */
NR_EXPORT void ncompass_nvtx_recorder_write(void) { nr_write_output(); }

/* fork() while another thread holds g_lock would leave the child's copy locked forever, so the
 * lock is held across fork. Only the calling thread survives in the child and the parent's
 * events belong to the parent: the child starts an empty recording ("%p" in the output path
 * gives it its own file) and keeps the domains and strings, whose handles stay valid. */
static void nr_before_fork(void) { pthread_mutex_lock(&g_lock); }
static void nr_after_fork_in_parent(void) { pthread_mutex_unlock(&g_lock); }
static void nr_after_fork_in_child(void) {
    pthread_mutex_unlock(&g_lock);
    g_threads = NULL;
    t_thread = NULL;
    g_written = 0;
    g_window = 0; /* the parent's window is the parent's: a child opens its own */
}

/* Every NVTX copy in the process (the nvtx package, torch, CUDA libraries) loads this library
 * and calls InitializeInjectionNvtx2 once; process-wide set-up must still happen once. */
static pthread_once_t g_setup_once = PTHREAD_ONCE_INIT;
static void nr_setup_process(void) {
    const char* output = getenv("NCOMPASS_NVTX_OUTPUT");
    if (output) snprintf(g_output_template, sizeof(g_output_template), "%s", output);
    const char* max_events = getenv("NCOMPASS_NVTX_MAX_EVENTS");
    g_events_left = max_events ? strtoull(max_events, NULL, 10) : NR_DEFAULT_MAX_EVENTS;
    g_windowed = getenv("NCOMPASS_NVTX_WINDOWS") != NULL;
    pthread_atfork(nr_before_fork, nr_after_fork_in_parent, nr_after_fork_in_child);
    atexit(nr_write_output);
}

/* ---------------------------------------------------------------- entry point */

static void nr_install(nvtx_function_table table, unsigned int size, unsigned int id,
                       nvtx_function_pointer function) {
    if (id < size && table[id]) *table[id] = function;
}

#define NR_FN(f) ((nvtx_function_pointer)(f))

NR_EXPORT int InitializeInjectionNvtx2(nvtx_get_export_table get_export_table) {
    const nvtx_callbacks_export_table* callbacks = get_export_table(NVTX_ETID_CALLBACKS);
    if (!callbacks || callbacks->struct_size < sizeof(*callbacks)) return 0;

    pthread_once(&g_setup_once, nr_setup_process);

    nvtx_function_table table;
    unsigned int size;
    if (!callbacks->get_module_function_table(NVTX_MODULE_CORE, &table, &size)) return 0;
    nr_install(table, size, CORE_MarkEx, NR_FN(MarkEx));
    nr_install(table, size, CORE_MarkA, NR_FN(MarkA));
    nr_install(table, size, CORE_MarkW, NR_FN(MarkW));
    nr_install(table, size, CORE_RangeStartEx, NR_FN(RangeStartEx));
    nr_install(table, size, CORE_RangeStartA, NR_FN(RangeStartA));
    nr_install(table, size, CORE_RangeStartW, NR_FN(RangeStartW));
    nr_install(table, size, CORE_RangeEnd, NR_FN(RangeEnd));
    nr_install(table, size, CORE_RangePushEx, NR_FN(RangePushEx));
    nr_install(table, size, CORE_RangePushA, NR_FN(RangePushA));
    nr_install(table, size, CORE_RangePushW, NR_FN(RangePushW));
    nr_install(table, size, CORE_RangePop, NR_FN(RangePop));
    nr_install(table, size, CORE_NameCategoryA, NR_FN(NameCategoryA));
    nr_install(table, size, CORE_NameCategoryW, NR_FN(NameCategoryW));
    nr_install(table, size, CORE_NameOsThreadA, NR_FN(NameOsThreadA));
    nr_install(table, size, CORE_NameOsThreadW, NR_FN(NameOsThreadW));

    if (!callbacks->get_module_function_table(NVTX_MODULE_CORE2, &table, &size)) return 0;
    nr_install(table, size, CORE2_DomainMarkEx, NR_FN(DomainMarkEx));
    nr_install(table, size, CORE2_DomainRangeStartEx, NR_FN(DomainRangeStartEx));
    nr_install(table, size, CORE2_DomainRangeEnd, NR_FN(DomainRangeEnd));
    nr_install(table, size, CORE2_DomainRangePushEx, NR_FN(DomainRangePushEx));
    nr_install(table, size, CORE2_DomainRangePop, NR_FN(DomainRangePop));
    nr_install(table, size, CORE2_DomainResourceCreate, NR_FN(DomainResourceCreate));
    nr_install(table, size, CORE2_DomainResourceDestroy, NR_FN(DomainResourceDestroy));
    nr_install(table, size, CORE2_DomainNameCategoryA, NR_FN(DomainNameCategoryA));
    nr_install(table, size, CORE2_DomainNameCategoryW, NR_FN(DomainNameCategoryW));
    nr_install(table, size, CORE2_DomainRegisterStringA, NR_FN(DomainRegisterStringA));
    nr_install(table, size, CORE2_DomainRegisterStringW, NR_FN(DomainRegisterStringW));
    nr_install(table, size, CORE2_DomainCreateA, NR_FN(DomainCreateA));
    nr_install(table, size, CORE2_DomainCreateW, NR_FN(DomainCreateW));
    nr_install(table, size, CORE2_DomainDestroy, NR_FN(DomainDestroy));
    nr_install(table, size, CORE2_Initialize, NR_FN(Initialize));
    return 1;
}
