#!/usr/bin/env python
"""Django's command-line utility for the Serenity market provisioning service.

A stop (SIGTERM) unwinds a command like Ctrl-C from the first line on: during start-up (settings, app imports)
no command has done anything yet, so it ends with 130 and one line saying so, not with the signal's own 143.
Once a runbook command runs, its own handling takes over (jobs/runbook_signals.py,
jobs/management/commands/_runbook.py).
"""

import os
import signal
import sys


def _interrupt(signum, frame):
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "serenity.settings")
    try:
        signal.signal(signal.SIGTERM, _interrupt)
        from django.core.management import execute_from_command_line

        execute_from_command_line(sys.argv)
    except KeyboardInterrupt:
        for sig in (signal.SIGINT, signal.SIGTERM):  # on the way out: a second signal cuts nothing short
            signal.signal(sig, signal.SIG_IGN)
        name = sys.argv[1] if len(sys.argv) > 1 else "manage.py"
        sys.stderr.write(f"{name}: interrupted; nothing more was done.\n")
        sys.exit(130)


if __name__ == "__main__":
    main()
