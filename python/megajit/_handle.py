"""Ownership of C handles: each is destroyed exactly once, by close(), by the
garbage collector, or at interpreter exit (weakref.finalize runs those in
reverse order of creation, so a buffer goes before its runtime)."""

import collections
import threading
import weakref

from .errors import invalid

_live = collections.Counter()
_lock = threading.Lock()


def live_handles():
    """Counts of the C handles this process holds open through megajit, by kind
    ({"runtime": 1, "symm_buffer": 2, ...}); kinds at zero are left out. A debugging
    aid: after every object is closed it is {}."""
    with _lock:
        return {kind: n for kind, n in _live.items() if n}


def _release(kind, destroy, ptr):
    try:
        destroy(ptr)
    finally:
        with _lock:
            _live[kind] -= 1


class Owner:
    """Base of every class that owns one C handle (`_kind` names it)."""

    _kind = "handle"
    _ptr = None
    _finalizer = None

    def _own(self, ptr, destroy, parent=None):
        """Takes ownership of `ptr`, released with destroy(ptr). A parent (the
        runtime) closes its children before itself."""
        self._ptr = ptr
        self._children = weakref.WeakSet()
        with _lock:
            _live[self._kind] += 1
        self._finalizer = weakref.finalize(self, _release, self._kind, destroy, ptr)
        if parent is not None:
            parent._children.add(self)

    @property
    def closed(self):
        """True once close() ran (or construction failed)."""
        return self._ptr is None

    def close(self):
        """Destroys the C object now (children first); later calls do nothing."""
        for child in list(getattr(self, "_children", ())):
            child.close()
        self._ptr = None
        if self._finalizer is not None:
            self._finalizer()

    def _handle(self):
        ptr = self._ptr
        if ptr is None:
            raise invalid(f"megajit: this {self._kind} is closed")
        return ptr

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
