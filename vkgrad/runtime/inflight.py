"""Submissions in flight on a device's queue: asynchronous dispatch, as in JAX.

A call submits its recorded sequence and returns; the `Submission` it gets back is done when the
sequence's fence signals. The queue runs submissions in order, and every recorded op starts with
a global barrier (kp patch 0001) whose first scope includes the earlier submissions, so a call
reading what an in-flight call writes (or writing what it reads: the shared scratch buffers)
needs no host wait.

Until its fence signals, a submission keeps alive everything it touches (`keep`: the pooled
buffers it binds, uploads into and writes), so a buffer goes back to its pool only when the last
submission that used it is done, never when Python drops the Array. Submissions complete in
order, oldest first: either someone waits (reading a value, `block_until_ready`, a full queue),
or a later call finds them done on its way (`poll`, one look at a fence, no wait).

At most `max_in_flight()` submissions are pending (VKGRAD_MAX_IN_FLIGHT, default 3, or
`set_max_in_flight(n)`); a call that finds the queue full waits for the oldest first. 0 makes
every call wait for its own submission (synchronous execution, for debugging).

An error seen only at completion (a lost device, the VKGRAD_DEBUG_NANS check) is raised by the
wait that completes the submission, whichever call that wait is in, and names the call that
submitted it.
"""

from __future__ import annotations

import collections
import os
import threading
import time

from .errors import DeviceError

DEFAULT_MAX_IN_FLIGHT = 3


def _env_bound() -> int:
    env = os.environ.get("VKGRAD_MAX_IN_FLIGHT", "").strip()
    if not env:
        return DEFAULT_MAX_IN_FLIGHT
    try:
        n = int(env)
    except ValueError:
        raise DeviceError(f"VKGRAD_MAX_IN_FLIGHT={env!r} is not a number of submissions") from None
    if n < 0:
        raise DeviceError(f"VKGRAD_MAX_IN_FLIGHT={n}: use 0 (synchronous) or more")
    return n


_bound = [None]   # resolved on first use, so the environment variable is read when it matters


def max_in_flight() -> int:
    """How many submissions may be pending at once (0: every call waits for its own)."""
    if _bound[0] is None:
        _bound[0] = _env_bound()
    return _bound[0]


def set_max_in_flight(n: int) -> int:
    """Set the bound on pending submissions (0 = synchronous); returns the previous bound."""
    if not isinstance(n, int) or n < 0:
        raise DeviceError(f"max_in_flight={n!r}: use 0 (synchronous) or a positive number")
    old = max_in_flight()
    _bound[0] = n
    return old


class Submission:
    """One submitted sequence, until its fence signals. `wait()` completes it (and every older
    one); `done` says whether that happened."""

    __slots__ = ("queue", "seq", "name", "keep", "on_done", "done", "error", "__weakref__")

    def __init__(self, queue, seq, name, keep, on_done):
        self.queue, self.seq, self.name = queue, seq, name
        self.keep, self.on_done = keep, on_done
        self.done, self.error = False, None

    def wait(self) -> None:
        if not self.done:
            self.queue.wait(self)
        if self.error is not None:
            raise self.error

    def __repr__(self):
        return f"<Submission of {self.name}: {'done' if self.done else 'pending'}>"


class HostResult:
    """A small result copied to the host inside its submission: `.result()` waits for that
    submission only, then holds the numpy value."""

    __slots__ = ("submission", "value")

    def __init__(self, submission=None):
        self.submission, self.value = submission, None

    def result(self):
        if self.submission is not None:   # pending, or its submission failed: wait / raise
            self.submission.wait()
        return self.value


class InFlight:
    """The pending submissions of one device's queue, oldest first. A blocking wait polls the
    fence for up to `spin_us` (VKGRAD_WAIT_SPIN_US, else the Target's `wait_spin_us`) before it
    sleeps in the driver: the host that waits for a step's loss and then makes the next call
    does so on a core that stayed awake, with its caches."""

    def __init__(self, spin_us: int = 0):
        env = os.environ.get("VKGRAD_WAIT_SPIN_US", "").strip()
        try:
            self.spin_s = (int(env) if env else spin_us) / 1e6
        except ValueError:
            raise DeviceError(f"VKGRAD_WAIT_SPIN_US={env!r} is not a number of "
                              "microseconds") from None
        self.pending: collections.deque = collections.deque()
        # Waits release the GIL (kp patch 0006): a second thread that waits too, or polls,
        # must not complete the same submission twice.
        self._completing = threading.Lock()

    def __len__(self):
        return len(self.pending)

    def make_room(self) -> None:
        """Complete what is already done; then, if the queue is full, wait for the oldest."""
        self.poll()
        bound = max(1, max_in_flight())
        while len(self.pending) >= bound:
            try:
                oldest = self.pending[0]
            except IndexError:         # another thread completed it meanwhile
                break
            self.wait(oldest)

    def submit(self, seq, name, keep=(), on_done=None) -> Submission:
        sub = Submission(self, seq, name, keep, on_done)
        seq.eval_async()
        self.pending.append(sub)
        if max_in_flight() == 0:
            sub.wait()
        return sub

    def poll(self) -> None:
        if not self._completing.acquire(blocking=False):
            return                     # another thread is waiting: it completes them
        try:
            while self.pending and self._complete_oldest(block=False):
                pass
        finally:
            self._completing.release()

    def wait(self, sub: Submission) -> None:
        while not sub.done:
            with self._completing:
                if not sub.done:
                    self._complete_oldest(block=True)

    def wait_all(self) -> None:
        while self.pending:
            with self._completing:
                if self.pending:
                    self._complete_oldest(block=True)

    def drain(self) -> None:
        """Wait for every pending submission without raising: an error stays with its
        submission, raised when its own results are read."""
        while self.pending:
            try:
                self.wait_all()
            except Exception:
                pass

    def _spin(self, seq) -> None:
        """Poll `seq`'s fence until it signals or spin_s has passed (the GIL is let go between
        looks, so other threads run)."""
        if self.spin_s <= 0:
            return
        until = time.perf_counter() + self.spin_s
        while seq.is_running() and time.perf_counter() < until:
            time.sleep(0)
            seq.eval_await(0)

    def _complete_oldest(self, block: bool) -> bool:
        """Complete the oldest pending submission (the caller holds `_completing`)."""
        sub = self.pending[0]
        try:
            sub.seq.eval_await(0)
            if block and sub.seq.is_running():
                self._spin(sub.seq)
                sub.seq.eval_await()
            if sub.seq.is_running():
                return False
        except RuntimeError as e:   # a lost device: nothing of this submission can be trusted
            sub.error = DeviceError(f"{sub.name}: the device failed while running it: {e}")
        self.pending.popleft()
        sub.done = True
        try:
            if sub.error is None and sub.on_done is not None:
                sub.on_done()
        except Exception as e:      # e.g. the NaN check: report it as this call's error
            sub.error = e
        finally:
            sub.keep = sub.on_done = sub.seq = None   # the pooled buffers may go back now
        if sub.error is not None:
            raise sub.error
        return True
