/* streamcell native status codes.
 *
 * Contract: every native function that can fail returns an int: 0 (SC_OK) on success or one
 * of the negative codes below. C code never touches Python exceptions; the Cython layer maps
 * codes to exceptions in exactly one place (native/common/status.pxi: check_status).
 */
#ifndef SC_STATUS_H
#define SC_STATUS_H

enum sc_status {
    SC_OK = 0,
    SC_ENOMEM = -1,      /* allocation failed */
    SC_EINVAL = -2,      /* invalid argument (caller bug or bad user option) */
    SC_EFULL = -3,       /* bounded structure is full (caller should back off / retry) */
    SC_EEMPTY = -4,      /* nothing to take */
    SC_ECLOSED = -5,     /* structure was closed / run stopped */
    SC_EFORMAT = -6,     /* serialized bytes malformed or incompatible */
    SC_EUNSUPPORTED = -7,/* operation not supported for this type / configuration */
    SC_EINTERNAL = -8,   /* invariant violated: a bug in streamcell */
    SC_ETYPE = -9,       /* data of the wrong type */
    SC_EPYTHON = -10     /* a Python callback raised; the exception is parked for the driver */
};

static inline const char *sc_status_name(int code) {
    switch (code) {
    case SC_OK: return "ok";
    case SC_ENOMEM: return "out of memory";
    case SC_EINVAL: return "invalid argument";
    case SC_EFULL: return "full";
    case SC_EEMPTY: return "empty";
    case SC_ECLOSED: return "closed";
    case SC_EFORMAT: return "malformed or incompatible serialized data";
    case SC_EUNSUPPORTED: return "not supported";
    case SC_EINTERNAL: return "internal invariant violated";
    case SC_ETYPE: return "wrong data type";
    case SC_EPYTHON: return "python callback raised";
    default: return "unknown error";
    }
}

#endif
