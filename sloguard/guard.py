"""The process boundary of every command: a closed stdout, Ctrl-C or a bug ends in one line, never a traceback.

Bad input is each command's job (a `PATH: why` line and exit 2); this is the net under it. `| head` closing
the pipe exits 141 like coreutils killed by SIGPIPE, Ctrl-C exits 130, and an unexpected exception prints one
line naming it and how to see the traceback (SLOGUARD_TRACEBACK=1), then exits 70 (EX_SOFTWARE).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

EXIT_PIPE, EXIT_INTERRUPT, EXIT_BUG = 141, 130, 70
TRACEBACK_ENV = "SLOGUARD_TRACEBACK"


def _silence_stdout() -> None:
    # Python flushes stdout again at exit; pointing the descriptor at /dev/null keeps that flush quiet too.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def run_guarded(fn: Callable[[], int], prog: str = "sloguard") -> int:
    """Run `fn` and return its exit code; turn a closed stdout, Ctrl-C or an escaped exception into one line."""
    try:
        code = fn()
        sys.stdout.flush()  # a reader that went away surfaces here, inside the guard
        return code
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_PIPE
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPT
    except Exception as exc:
        if os.environ.get(TRACEBACK_ENV) == "1":
            raise
        text = " ".join(str(exc).split())[:300]
        print(f"{prog}: internal error: {type(exc).__name__}: {text} (a bug: please report it with the command "
              f"line; {TRACEBACK_ENV}=1 shows the traceback)", file=sys.stderr)
        return EXIT_BUG
