"""The ``snooze`` command line. Only this package prints."""
