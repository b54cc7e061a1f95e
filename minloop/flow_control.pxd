# Flow control shared by the stream, datagram, pipe transports and the
# TLS layer: asyncio's transports._FlowControlMixin, as functions the compiled
# code inlines.

from libc.math cimport ceil, floor

from .includes cimport PY_SSIZE_T_MAX


cdef inline tuple water_marks(high, low, default_high=64 * 1024,
                              bint pause_at_high=False):
    """(high, low) as asyncio's _set_write_buffer_limits settles them (and
    its TLS layer's add_flowcontrol_defaults, with another default_high),
    as the whole numbers of bytes the transports compare with.

    asyncio takes any numbers: a float mark is the same comparison with a
    whole number of bytes (a size is above 10.5 when above 10), and one
    beyond Py_ssize_t (float('inf'), 2**70) is never reached.  The TLS layer
    pauses at high (size >= high), the transports above it (size > high).
    """
    if high is None:
        if low is None:
            high = default_high
        else:
            high = 4 * low
    if low is None:
        low = high // 4
    if not high >= low >= 0:
        raise ValueError(
            f'high ({high!r}) must be >= low ({low!r}) must be >= 0')
    return (_whole_bytes(high, pause_at_high), _whole_bytes(low, False))


cdef inline Py_ssize_t _whole_bytes(mark, bint round_up) except -1:
    if mark >= PY_SSIZE_T_MAX:
        return PY_SSIZE_T_MAX
    if type(mark) is int:
        return mark
    return <Py_ssize_t>(ceil(mark) if round_up else floor(mark))


cdef inline int tell_protocol(object loop, object transport, object protocol,
                              bint pause) except -1:
    """protocol.pause_writing() or resume_writing(); what it raises goes to
    the loop's exception handler, as asyncio reports it."""
    try:
        if pause:
            protocol.pause_writing()
        else:
            protocol.resume_writing()
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException as exc:
        loop.call_exception_handler({
            'message': ('protocol.pause_writing() failed' if pause
                        else 'protocol.resume_writing() failed'),
            'exception': exc,
            'transport': transport,
            'protocol': protocol,
        })
    return 0


cdef inline int maybe_pause_protocol(object loop, object transport,
                                     object protocol, Py_ssize_t size,
                                     Py_ssize_t high, bint *paused) except -1:
    """_FlowControlMixin._maybe_pause_protocol over a transport's fields:
    pause_writing() once the buffer grows past the high-water mark."""
    if size > high and not paused[0]:
        paused[0] = True
        tell_protocol(loop, transport, protocol, True)
    return 0


cdef inline int maybe_resume_protocol(object loop, object transport,
                                      object protocol, Py_ssize_t size,
                                      Py_ssize_t low, bint *paused) except -1:
    """_FlowControlMixin._maybe_resume_protocol: resume_writing() once the
    buffer is down to the low-water mark."""
    if paused[0] and size <= low:
        paused[0] = False
        tell_protocol(loop, transport, protocol, False)
    return 0
