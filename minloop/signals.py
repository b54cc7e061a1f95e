"""Signal handling for the loop: asyncio's add_signal_handler semantics.

How a signal reaches a handler:
  1. The kernel interrupts the main thread; CPython's C-level handler writes
     the signal number into the fd given to signal.set_wakeup_fd() (our
     socketpair's write end) and flags the signal for the Python level.
  2. That makes the read end readable, which wakes the poller (a wait
     interrupted by the signal itself returns EINTR first, and the loop runs
     Python-level handlers then; ours is a no-op).
  3. The loop's reader for the socket reads the signal numbers and queues
     the registered handles, which run in the loop like any callback.
The socketpair exists only once a handler has been added, so a loop that
never handles signals costs no fds and no extra poll registration.
"""

import errno
import signal
import socket
import sys
import warnings

from asyncio import coroutines as _aio_coroutines
from asyncio.log import logger

from ._asyncio_compat import iscoroutinefunction as _iscoroutinefunction


def _sighandler_noop(signum, frame):
    """Dummy signal handler: the work happens in the loop."""


class SignalHandlingMixin:
    """add_signal_handler/remove_signal_handler for a minloop Loop."""

    def _init_signals(self):
        self._signal_handlers = {}
        self._ssock = None   # read end, watched by the loop
        self._csock = None   # write end, given to signal.set_wakeup_fd()

    def _open_signal_socket(self):
        if self._ssock is not None:
            return
        ssock, csock = socket.socketpair()
        ssock.setblocking(False)
        csock.setblocking(False)
        self._ssock, self._csock = ssock, csock
        self._add_reader(ssock.fileno(), self._read_signals)

    def _close_signals(self):
        if self._signal_handlers:
            if not sys.is_finalizing():
                for sig in list(self._signal_handlers):
                    self.remove_signal_handler(sig)
            else:
                warnings.warn(f"Closing the loop {self!r} "
                              f"on interpreter shutdown "
                              f"stage, skipping signal handlers removal",
                              ResourceWarning,
                              source=self)
                self._signal_handlers.clear()
        if self._ssock is not None:
            # No remove_reader: the loop is closing and its poller goes with
            # it (see LoopCore._clear_fd_table on forked children).
            self._ssock.close()
            self._csock.close()
            self._ssock = self._csock = None

    def _read_signals(self):
        while True:
            try:
                data = self._ssock.recv(4096)
            except InterruptedError:
                continue
            except BlockingIOError:
                break
            if not data:
                break
            for signum in data:
                if signum:
                    self._handle_signal(signum)

    def _handle_signal(self, sig):
        """Internal helper that is the actual signal handler."""
        handle = self._signal_handlers.get(sig)
        if handle is None:
            return  # Assume it's some race condition.
        if handle._cancelled:
            self.remove_signal_handler(sig)  # Remove it properly.
        else:
            self._add_callback(handle)

    def _check_signal(self, sig):
        """Internal helper to validate a signal.

        Raise ValueError if the signal number is invalid or uncatchable.
        Raise RuntimeError if there is a problem setting up the handler.
        """
        if not isinstance(sig, int):
            raise TypeError(f'sig must be an int, not {sig!r}')
        if sig not in signal.valid_signals():
            raise ValueError(f'invalid signal number {sig}')

    def add_signal_handler(self, sig, callback, *args):
        """Add a handler for a signal.  UNIX only.

        Raise ValueError if the signal number is invalid or uncatchable.
        Raise RuntimeError if there is a problem setting up the handler.
        """
        if (_aio_coroutines.iscoroutine(callback) or
                _iscoroutinefunction(callback)):
            raise TypeError("coroutines cannot be used "
                            "with add_signal_handler()")
        self._check_signal(sig)
        self._check_closed()
        self._open_signal_socket()
        try:
            # set_wakeup_fd() raises ValueError if this is not the main
            # thread.  Calling it first ensures that a loop running in
            # another thread cannot add a signal handler.
            signal.set_wakeup_fd(self._csock.fileno())
        except (ValueError, OSError) as exc:
            raise RuntimeError(str(exc))

        handle = self._new_handle(callback, args)
        self._signal_handlers[sig] = handle

        try:
            # Register a dummy signal handler to ask Python to write the
            # signal number to the wakeup fd.
            signal.signal(sig, _sighandler_noop)
            # Set SA_RESTART to limit EINTR occurrences.
            signal.siginterrupt(sig, False)
        except OSError as exc:
            del self._signal_handlers[sig]
            if not self._signal_handlers:
                try:
                    signal.set_wakeup_fd(-1)
                except (ValueError, OSError) as nexc:
                    logger.info('set_wakeup_fd(-1) failed: %s', nexc)
            if exc.errno == errno.EINVAL:
                raise RuntimeError(f'sig {sig:d} cannot be caught')
            raise

    def remove_signal_handler(self, sig):
        """Remove a handler for a signal.  UNIX only.

        Return True if a signal handler was removed, False if not.
        """
        self._check_signal(sig)
        try:
            del self._signal_handlers[sig]
        except KeyError:
            return False

        if sig == signal.SIGINT:
            handler = signal.default_int_handler
        else:
            handler = signal.SIG_DFL

        try:
            signal.signal(sig, handler)
        except OSError as exc:
            if exc.errno == errno.EINVAL:
                raise RuntimeError(f'sig {sig:d} cannot be caught')
            raise

        if not self._signal_handlers:
            try:
                signal.set_wakeup_fd(-1)
            except (ValueError, OSError) as exc:
                logger.info('set_wakeup_fd(-1) failed: %s', exc)

        return True
