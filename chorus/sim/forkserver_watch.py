"""Imported only into the multiprocessing forkserver that a run starts (LocalExecutor preloads it):
the forkserver then exits as soon as the run is gone, and its workers (PR_SET_PDEATHSIG, see
worker_guard) with it. Without this a forkserver outlived a `kill -9` of its run (measured: it
was reparented to init and kept its idle workers). A thread polls the parent instead of
PR_SET_PDEATHSIG, which fires when the *thread* that started the forkserver ends, not the run."""
import os
import threading
import time


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.25)
    os._exit(0)


threading.Thread(target=_watch, args=(os.getppid(),), daemon=True, name="chorus-run-watch").start()
