"""Writing a tool's report to standard output, which may be a closed pipe or a full disk.

``python -m components.reference | head -3`` closes the pipe while the tool writes: Python raises
``BrokenPipeError`` at the write, and again at the interpreter's last flush ("Exception ignored ...").
``> /dev/full`` (a full disk) raises ``OSError`` (ENOSPC). Neither is a bug to show as a traceback:
a closed pipe means the reader has what it wanted; a full disk is one line on stderr.
"""

from __future__ import annotations

import os
import sys


def emit(text: str) -> bool:
    """Write ``text`` to stdout and flush; ``False`` when it could not be written (a closed pipe says
    nothing, anything else one line on stderr). Stdout then points at ``/dev/null``, so the
    interpreter's final flush has nothing left to fail on (Python docs, ``signal``: "Note on SIGPIPE")."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        _to_devnull()
        return False
    except OSError as err:
        _to_devnull()
        print(f"gpuaas: cannot write to standard output: {err.strerror or err}", file=sys.stderr)
        return False
    return True


def _to_devnull() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)
