"""Event and Queue: how stimulus tasks wait for each other."""
from collections import deque

import runtime
from triggers import Trigger


class _EventWait(Trigger):
    def __init__(self, event):
        self.event = event


class Event:
    def __init__(self, name=None):
        self.name, self.data, self._set, self._waiters = name, None, False, []

    def set(self, data=None):
        self._set, self.data = True, data
        waiters, self._waiters = self._waiters, []
        for task, trig in waiters:
            runtime.S.wake(task, trig)

    def clear(self):
        self._set = False

    def is_set(self):
        return self._set

    def wait(self):
        return _EventWait(self)


class QueueFull(Exception):
    pass


class QueueEmpty(Exception):
    pass


class Queue:
    def __init__(self, maxsize=0):
        self.maxsize, self._items, self._changed = maxsize, deque(), Event()

    def qsize(self):
        return len(self._items)

    def empty(self):
        return not self._items

    def full(self):
        return 0 < self.maxsize <= len(self._items)

    def _notify(self):
        event, self._changed = self._changed, Event()
        event.set()

    def put_nowait(self, item):
        if self.full():
            raise QueueFull()
        self._items.append(item)
        self._notify()

    def get_nowait(self):
        if not self._items:
            raise QueueEmpty()
        item = self._items.popleft()
        self._notify()
        return item

    async def put(self, item):
        while self.full():
            await self._changed.wait()
        self.put_nowait(item)

    async def get(self):
        while self.empty():
            await self._changed.wait()
        return self.get_nowait()
