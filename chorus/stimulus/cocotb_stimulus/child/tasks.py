"""cocotb tasks for the stimulus: Task, First/Combine, with_timeout, start_soon and the rest."""
import runtime
from sync import Event
from triggers import NullTrigger, Timer, _Done


class CancelledError(BaseException):
    """Thrown into a cancelled task; like asyncio's, `except Exception` does not catch it."""


class _EndTest(BaseException):
    pass


class SimTimeoutError(TimeoutError):
    pass


class Task:
    def __init__(self, coro, name=None):
        if not hasattr(coro, "send"):
            if not hasattr(coro, "__await__"):
                raise TypeError(f"a Task needs a coroutine, not {coro!r}")
            coro = _awaiting(coro)
        self._coro, self._name = coro, name or f"Task {id(self):x}"
        self._done = self._scheduled = self._cancelled = False
        self._result = self._exc = self._waiting = self._cancel_exc = None
        self._watchers = []

    def _start(self):
        if not self._scheduled:
            self._scheduled = True
            runtime.S.ready.append((self, None, None))

    def _step(self, value, exc):
        if self._done:
            return
        self._waiting = None
        if self._cancel_exc is not None:
            exc, self._cancel_exc = self._cancel_exc, None
        runtime.S.current = self
        try:
            trig = self._coro.throw(exc) if exc is not None else self._coro.send(value)
        except StopIteration as stop:
            self._finish(result=stop.value)
        except CancelledError:
            self._finish(cancelled=True)
        except _EndTest:
            raise
        except BaseException as e:  # the stimulus's own error, reported with its line
            self._finish(exc=e)
        else:
            runtime.S.wait(self, trig)
        finally:
            runtime.S.current = None

    def _finish(self, result=None, exc=None, cancelled=False):
        self._done, self._result, self._exc, self._cancelled = True, result, exc, cancelled
        watchers, self._watchers = self._watchers, []
        for task, trig in watchers:
            runtime.S.wake(task, trig)
        if exc is not None and not watchers and runtime.S.failure is None:
            runtime.S.failure = exc  # as in cocotb: an error nobody awaits ends the test

    def done(self):
        return self._done

    def cancelled(self):
        return self._cancelled

    def result(self):
        if not self._done:
            raise RuntimeError("the task has not finished")
        if self._cancelled:
            raise CancelledError()
        if self._exc is not None:
            raise self._exc
        return self._result

    def exception(self):
        if self._cancelled:
            raise CancelledError()
        return self._exc

    def cancel(self, msg=None):
        if self._done:
            return False
        self._cancel_exc = CancelledError(*((msg,) if msg else ()))
        if self._waiting is not None:
            runtime.S.unwait(self)
            runtime.S.ready.append((self, None, None))
        self._start()
        return True

    kill = cancel

    @property
    def complete(self):
        return _Done(self)

    def join(self):
        return _Done(self)

    def get_name(self):
        return self._name

    def set_name(self, name):
        self._name = str(name)

    def __await__(self):
        self._start()
        yield _Done(self)
        return self.result()

    def __repr__(self):
        return f"<{self._name}>"


async def _awaiting(awaitable):
    return await awaitable


class First:
    def __init__(self, *triggers):
        if not triggers:
            raise ValueError("First() requires at least one trigger")
        self.triggers = triggers

    def __await__(self):
        return self._wait().__await__()

    async def _wait(self):
        won, done = [], Event()

        async def one(t):
            try:
                got = (True, await t)
            except CancelledError:
                raise
            except BaseException as e:
                got = (False, e)
            if not won:
                won.append(got)
                done.set()

        tasks = [start_soon(one(t)) for t in self.triggers]
        try:
            await done.wait()
        finally:
            for t in tasks:
                t.cancel()
        ok, value = won[0]
        if not ok:
            raise value
        return value


class Combine(First):
    async def _wait(self):
        for task in [start_soon(_awaiting(t)) for t in self.triggers]:
            await task
        return self


async def with_timeout(trigger, timeout_time, timeout_unit="step", round_mode=None):
    if hasattr(trigger, "send"):
        trigger = start_soon(trigger)
    timer = Timer(timeout_time, timeout_unit, round_mode=round_mode)
    value = await First(trigger, timer)
    if value is timer:
        if isinstance(trigger, Task):
            trigger.cancel()
        raise SimTimeoutError()
    return value


def start_soon(coro, *, name=None):
    task = coro if isinstance(coro, Task) else Task(coro, name)
    task._start()
    return task


async def start(coro, *, name=None):
    task = start_soon(coro, name=name)
    await NullTrigger()
    return task


def create_task(coro, *, name=None):
    return coro if isinstance(coro, Task) else Task(coro, name)


def current_task():
    return runtime.S.current


def end_test(msg=None):
    raise _EndTest(msg)


def test(*args, **kwargs):  # @cocotb.test() and @cocotb.test: the function itself
    return args[0] if len(args) == 1 and callable(args[0]) and not kwargs else (lambda f: f)
