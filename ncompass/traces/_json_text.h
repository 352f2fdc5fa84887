/* Strict reading of JSON text, for the event parser of _fold.c (included there, once).
 *
 * Every function here accepts only what a conforming JSON parser accepts (RFC 8259: no NaN,
 * no comments, no trailing commas, strings of valid UTF-8 without raw control characters, no
 * lone surrogate escapes), and answers "no" to everything else. A "no" never raises: the caller
 * then hands the whole text to the general decoders, which say what is wrong and where. So
 * being strict costs nothing but speed on damaged files, and never changes a result.
 */
#include <float.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline)) /* the hot readers, everywhere */
#else
#define ALWAYS_INLINE inline
#endif

#define JSON_MAX_DEPTH 64 /* events are 2-4 deep; deeper text goes to the general decoders */

typedef struct {
    const unsigned char *at;
    const unsigned char *end;
} Cursor;

/* Byte classes: 1 for JSON whitespace. */
static inline void skip_whitespace(Cursor *cursor) {
    const unsigned char *at = cursor->at, *end = cursor->end;
    while (at < end && (*at == ' ' || *at == '\n' || *at == '\r' || *at == '\t')) at++;
    cursor->at = at;
}

static inline int hex_value(unsigned char byte) {
    if (byte >= '0' && byte <= '9') return byte - '0';
    if (byte >= 'a' && byte <= 'f') return byte - 'a' + 10;
    if (byte >= 'A' && byte <= 'F') return byte - 'A' + 10;
    return -1;
}

/* The length of the valid UTF-8 sequence of more than one byte at ``at``, or 0. */
static int utf8_sequence(const unsigned char *at, const unsigned char *end) {
    unsigned char lead = at[0];
    int length;
    unsigned char low = 0x80, high = 0xBF; /* the range of the second byte */
    if (lead >= 0xC2 && lead <= 0xDF) {
        length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3;
        if (lead == 0xE0) low = 0xA0;  /* no overlong forms */
        if (lead == 0xED) high = 0x9F; /* no surrogates */
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4;
        if (lead == 0xF0) low = 0x90;
        if (lead == 0xF4) high = 0x8F; /* nothing above U+10FFFF */
    } else {
        return 0;
    }
    if (end - at < length || at[1] < low || at[1] > high) return 0;
    for (int index = 2; index < length; index++)
        if (at[index] < 0x80 || at[index] > 0xBF) return 0;
    return length;
}

/* Read a string whose opening quote is at the cursor; leave the cursor after its closing
 * quote. 1 when valid (``*escaped`` says whether it holds a backslash escape), else 0. */
static ALWAYS_INLINE int read_string(Cursor *cursor, int *escaped) {
    const unsigned char *at = cursor->at + 1, *end = cursor->end;
    *escaped = 0;
    for (;;) {
        /* the common case: a run of plain ASCII, 16 bytes at a time where SSE2 is there */
#if defined(__SSE2__)
        const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'),
                      space = _mm_set1_epi8(0x20);
        while (end - at >= 16) {
            __m128i bytes = _mm_loadu_si128((const __m128i *)at);
            /* signed: bytes >= 0x80 are negative, so "< 0x20" also finds non-ASCII */
            __m128i special = _mm_or_si128(
                _mm_or_si128(_mm_cmpeq_epi8(bytes, quote), _mm_cmpeq_epi8(bytes, backslash)),
                _mm_cmplt_epi8(bytes, space));
            int mask = _mm_movemask_epi8(special);
            if (mask) {
                at += __builtin_ctz((unsigned)mask);
                break;
            }
            at += 16;
        }
#endif
        while (at < end && *at >= 0x20 && *at != '"' && *at != '\\' && *at < 0x80) at++;
        if (at >= end) return 0;
        unsigned char byte = *at;
        if (byte == '"') {
            cursor->at = at + 1;
            return 1;
        }
        if (byte < 0x20) return 0;
        if (byte == '\\') {
            *escaped = 1;
            if (end - at < 2) return 0;
            unsigned char kind = at[1];
            if (kind == 'u') {
                if (end - at < 6) return 0;
                int unit = 0;
                for (int index = 2; index < 6; index++) {
                    int digit = hex_value(at[index]);
                    if (digit < 0) return 0;
                    unit = unit * 16 + digit;
                }
                /* surrogate pairs are legal, lone halves are not everywhere: leave both out */
                if (unit >= 0xD800 && unit <= 0xDFFF) return 0;
                at += 6;
            } else if (kind == '"' || kind == '\\' || kind == '/' || kind == 'b' || kind == 'f' ||
                       kind == 'n' || kind == 'r' || kind == 't') {
                at += 2;
            } else {
                return 0;
            }
            continue;
        }
        int length = utf8_sequence(at, end);
        if (length == 0) return 0;
        at += length;
    }
}

/* A number as written: its decimal digits (without leading zeros, up to 19 kept exactly),
 * the power of ten they are scaled by, and whether it was written as an integer. */
typedef struct {
    const unsigned char *start;
    Py_ssize_t length;
    uint64_t mantissa;
    int digits;   /* significant digits, counted past the 19 kept */
    int exponent; /* value = mantissa * 10**exponent (when digits <= 19) */
    int negative;
    int is_integer;
} Number;

/* Read a number at the cursor (RFC 8259 grammar); 1 when valid, else 0. */
static ALWAYS_INLINE int read_number(Cursor *cursor, Number *number) {
    const unsigned char *at = cursor->at, *end = cursor->end;
    number->start = at;
    number->mantissa = 0;
    number->digits = 0;
    number->exponent = 0;
    number->negative = 0;
    number->is_integer = 1;
    if (at < end && *at == '-') {
        number->negative = 1;
        at++;
    }
    if (at >= end) return 0;
    if (*at == '0') {
        at++;
    } else if (*at >= '1' && *at <= '9') {
        while (at < end && *at >= '0' && *at <= '9') {
            if (number->digits < 19) {
                number->mantissa = number->mantissa * 10 + (uint64_t)(*at - '0');
            } else {
                number->exponent++;
            }
            number->digits++;
            at++;
        }
    } else {
        return 0;
    }
    if (at < end && *at == '.') {
        number->is_integer = 0;
        at++;
        if (at >= end || *at < '0' || *at > '9') return 0;
        while (at < end && *at >= '0' && *at <= '9') {
            if (number->digits == 0 && *at == '0') {
                number->exponent--; /* 0.000123: leading zeros are not significant */
            } else if (number->digits < 19) {
                number->mantissa = number->mantissa * 10 + (uint64_t)(*at - '0');
                number->exponent--;
                number->digits++;
            } else {
                number->digits++;
            }
            at++;
        }
    }
    if (at < end && (*at == 'e' || *at == 'E')) {
        number->is_integer = 0;
        at++;
        int negative = 0;
        if (at < end && (*at == '+' || *at == '-')) negative = *at++ == '-';
        if (at >= end || *at < '0' || *at > '9') return 0;
        int value = 0;
        while (at < end && *at >= '0' && *at <= '9') {
            if (value < 100000) value = value * 10 + (*at - '0');
            at++;
        }
        number->exponent += negative ? -value : value;
    }
    number->length = at - number->start;
    cursor->at = at;
    return 1;
}

/* The number as an int64 when it was written as an integer that fits: 1, else 0. */
static int number_as_integer(const Number *number, long long *value) {
    if (!number->is_integer || number->digits > 19 || number->exponent != 0) return 0;
    if (number->negative) {
        if (number->mantissa > (uint64_t)INT64_MAX + 1) return 0;
        *value = (long long)(0 - number->mantissa);
    } else {
        if (number->mantissa > (uint64_t)INT64_MAX) return 0;
        *value = (long long)number->mantissa;
    }
    return 1;
}

static const double EXACT_POWERS_OF_TEN[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                             1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                             1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

#if LDBL_MANT_DIG == 64 && defined(__x86_64__)
/* 10**k for k <= 27 is exact in the x87 format (5**27 < 2**64). */
static const long double EXTENDED_POWERS_OF_TEN[] = {
    1e0L,  1e1L,  1e2L,  1e3L,  1e4L,  1e5L,  1e6L,  1e7L,  1e8L,  1e9L,
    1e10L, 1e11L, 1e12L, 1e13L, 1e14L, 1e15L, 1e16L, 1e17L, 1e18L, 1e19L,
    1e20L, 1e21L, 1e22L, 1e23L, 1e24L, 1e25L, 1e26L, 1e27L};

/* The correctly rounded double, through one exact-operand x87 operation: its 64-bit result is
 * correctly rounded, and rounding it again to 53 bits gives the correctly rounded double unless
 * it lies exactly halfway between two doubles (then 0: the caller parses the text). */
static int extended_to_double(uint64_t mantissa, int exponent, double *value) {
    if (exponent < -27 || exponent > 27) return 0;
    long double result = (long double)mantissa;
    if (exponent < 0)
        result /= EXTENDED_POWERS_OF_TEN[-exponent];
    else
        result *= EXTENDED_POWERS_OF_TEN[exponent];
    uint64_t significand;
    memcpy(&significand, &result, sizeof(significand)); /* x87: the low 8 bytes */
    if ((significand & 0x7FF) == 0x400) return 0;        /* a tie for 53 bits: unsure */
    *value = (double)result;
    return 1;
}
#else
static int extended_to_double(uint64_t mantissa, int exponent, double *value) {
    (void)mantissa;
    (void)exponent;
    (void)value;
    return 0;
}
#endif

/* The number as the correctly rounded double Python's float() gives for its text: 1, else 0
 * (a text too long to convert here, or an overflow to infinity). */
static int number_as_double(const Number *number, double *value) {
    double result;
    if (number->digits <= 19) {
        if (number->mantissa == 0) {
            result = 0.0;
        } else if (number->mantissa <= (1ULL << 53) && number->exponent >= -22 &&
                   number->exponent <= 22) {
            /* both operands exact: one correctly rounded operation (Clinger's fast path) */
            result = (double)number->mantissa;
            if (number->exponent < 0)
                result /= EXACT_POWERS_OF_TEN[-number->exponent];
            else
                result *= EXACT_POWERS_OF_TEN[number->exponent];
        } else if (!extended_to_double(number->mantissa, number->exponent, &result)) {
            goto slow;
        }
        *value = number->negative ? -result : result;
        return 1;
    }
slow:;
    char text[64];
    if (number->length >= (Py_ssize_t)sizeof(text)) return 0;
    memcpy(text, number->start, (size_t)number->length);
    text[number->length] = '\0';
    result = PyOS_string_to_double(text, NULL, NULL);
    if (result == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (result > DBL_MAX || result < -DBL_MAX) return 0;
    *value = result;
    return 1;
}

static int skip_value(Cursor *cursor, int depth);

/* Skip the members of an object or the items of an array whose opener is at the cursor. */
static int skip_container(Cursor *cursor, int depth) {
    unsigned char closer = *cursor->at == '{' ? '}' : ']';
    int is_object = closer == '}';
    if (depth >= JSON_MAX_DEPTH) return 0;
    cursor->at++;
    skip_whitespace(cursor);
    if (cursor->at < cursor->end && *cursor->at == closer) {
        cursor->at++;
        return 1;
    }
    for (;;) {
        if (is_object) {
            int escaped;
            if (cursor->at >= cursor->end || *cursor->at != '"' || !read_string(cursor, &escaped))
                return 0;
            skip_whitespace(cursor);
            if (cursor->at >= cursor->end || *cursor->at != ':') return 0;
            cursor->at++;
            skip_whitespace(cursor);
        }
        if (!skip_value(cursor, depth + 1)) return 0;
        skip_whitespace(cursor);
        if (cursor->at >= cursor->end) return 0;
        if (*cursor->at == ',') {
            cursor->at++;
            skip_whitespace(cursor);
            continue;
        }
        if (*cursor->at != closer) return 0;
        cursor->at++;
        return 1;
    }
}

static int read_literal(Cursor *cursor, const char *literal, size_t length) {
    if ((size_t)(cursor->end - cursor->at) < length || memcmp(cursor->at, literal, length) != 0)
        return 0;
    cursor->at += length;
    return 1;
}

/* Skip one value of any type at the cursor (``depth`` containers around it); 1 when valid. */
static int skip_value(Cursor *cursor, int depth) {
    if (cursor->at >= cursor->end) return 0;
    switch (*cursor->at) {
    case '"': {
        int escaped;
        return read_string(cursor, &escaped);
    }
    case '{':
    case '[':
        return skip_container(cursor, depth);
    case 't':
        return read_literal(cursor, "true", 4);
    case 'f':
        return read_literal(cursor, "false", 5);
    case 'n':
        return read_literal(cursor, "null", 4);
    default: {
        Number number;
        return read_number(cursor, &number);
    }
    }
}
