"""CPython's test.test_asyncio run with minloop as the event loop (see conftest.py)."""
