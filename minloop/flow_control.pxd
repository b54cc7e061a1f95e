# Flow control shared by the stream, datagram, pipe transports and the
# TLS layer: asyncio's transports._FlowControlMixin, as functions the compiled
# code inlines.


cdef inline tuple water_marks(high, low, default_high=64 * 1024):
    """(high, low) as asyncio's _set_write_buffer_limits settles them (and
    its TLS layer's add_flowcontrol_defaults, with another default_high)."""
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
    return (high, low)


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
