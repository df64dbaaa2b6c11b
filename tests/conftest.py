import signal

# Tests that press Ctrl-C (SIGINT) on a command they started need the command to take it.  A
# process started in the background by a shell without job control (`cmd &` in a script, a CI
# runner's) inherits SIGINT ignored, its children too, and Python keeps an ignored SIGINT: the
# suite takes the default back so its children start with it (a handled signal is reset to the
# default across exec; an ignored one would stay ignored).
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_sessionfinish(session, exitstatus):
    # A run that collects nothing is a broken run, not a green one.
    if session.testscollected == 0 and exitstatus in (0, 5):
        session.exitstatus = 1
