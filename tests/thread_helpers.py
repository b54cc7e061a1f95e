"""Starting and joining the threads of the cross-thread tests
(test_threads.py, test_thread_guards.py)."""


def start_all(threads):
    for t in threads:
        t.start()


def join_all(threads):
    """Join each (10 s at most); none may be left running: a thread still
    alive means a call into the loop hung."""
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads)
