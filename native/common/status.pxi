# Included by every native/*.pyx: the one mapping from C status codes to exceptions.
from streamcell.errors import NativeError as _NativeError

cdef extern from "sc_status.h":
    const char *sc_status_name(int code) nogil
    int SC_OK, SC_ENOMEM, SC_EINVAL, SC_EFULL, SC_EEMPTY, SC_ECLOSED, SC_EFORMAT
    int SC_EUNSUPPORTED, SC_EINTERNAL, SC_ETYPE, SC_EPYTHON


cdef inline int check_status(int code, str where) except -1:
    """Raise the streamcell exception for a negative status code; return 0 otherwise."""
    if code >= 0:
        return 0
    if code == SC_ENOMEM:
        raise MemoryError(f"{where}: out of memory")
    if code == SC_EINVAL:
        raise ValueError(f"{where}: {sc_status_name(code).decode()}")
    if code == SC_EFORMAT:
        raise ValueError(f"{where}: {sc_status_name(code).decode()}")
    if code == SC_ETYPE:
        raise TypeError(f"{where}: {sc_status_name(code).decode()}")
    raise _NativeError(f"{where}: {sc_status_name(code).decode()} (status {code})", code)
