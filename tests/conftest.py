import pytest


def pytest_sessionfinish(session, exitstatus):
    # A run that collects nothing is a broken run, not a green one.
    if session.testscollected == 0 and exitstatus in (0, 5):
        session.exitstatus = 1
