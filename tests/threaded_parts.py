"""Run a function on each part of the rows in its own thread, as processes
would, with a ``gather`` that joins every part's array in order."""

import threading

import numpy as np


def run_parts(parts, fit):
    """``[fit(rows, gather) for rows in parts]``, each in its own thread;
    ``gather(array)`` returns the parts' arrays concatenated in part order
    (every thread waits for the others, as a collective)."""
    barrier = threading.Barrier(len(parts))
    slots, results = [None] * len(parts), [None] * len(parts)

    def run(index):
        def gather(array):
            slots[index] = array
            barrier.wait()
            joined = np.concatenate(slots, axis=0)
            barrier.wait()
            return joined

        results[index] = fit(parts[index], gather)

    threads = [threading.Thread(target=run, args=(index,)) for index in range(len(parts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results
